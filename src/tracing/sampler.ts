import {
  AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler
} from '@opentelemetry/sdk-trace'
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources'
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions'
import type { Config } from '../config.ts'

/** The sampler `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` name, as the OpenTelemetry specification defines them. */
export function samplerOf ({ OTEL_TRACES_SAMPLER: name, OTEL_TRACES_SAMPLER_ARG: ratio }: Config): Sampler {
  switch (name) {
    case 'always_on': return new AlwaysOnSampler()
    case 'always_off': return new AlwaysOffSampler()
    case 'traceidratio': return new TraceIdRatioBasedSampler(ratio)
    case 'parentbased_always_on': return new ParentBasedSampler({ root: new AlwaysOnSampler() })
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() })
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) })
  }
}

/** `OTEL_RESOURCE_ATTRIBUTES` (`key=value,...`, values percent-encoded) and `service.name`, which they may not change. */
export function resourceOf (config: Config): Resource {
  const attributes: Record<string, string> = {}
  for (const pair of (config.OTEL_RESOURCE_ATTRIBUTES ?? '').split(',')) {
    const at = pair.indexOf('=')
    if (at <= 0) continue
    attributes[pair.slice(0, at).trim()] = decodeOrKeep(pair.slice(at + 1).trim())
  }
  return resourceFromAttributes({ ...attributes, [ATTR_SERVICE_NAME]: config.OTEL_SERVICE_NAME })
}

function decodeOrKeep (value: string): string {
  try {
    return decodeURIComponent(value)
  } catch {
    return value
  }
}
