// The tests of what operators read and deploy (docs, manifests, image, configuration), in one process: a process per file cost more than the tests themselves (docs/testing.md).
import './files/compose.ts'
import './files/config.ts'
import './files/docs.ts'
import './files/env-example.ts'
import './files/hygiene.ts'
import './files/image.ts'
import './files/kubernetes.ts'
import './files/readme.ts'
