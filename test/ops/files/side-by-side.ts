import t from 'tap'

// files.test.ts imports this module first, so that this is set before any module adds a test: the modules' tests
// run side by side, four at a time. Most are quick and synchronous; the others wait on a process of their own
// (the server, docker-compose, kubectl, node with other flags), and the rest go on meanwhile. None of them times
// anything, and each builds what it uses.
t.jobs = 4
