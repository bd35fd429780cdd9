# syntax=docker/dockerfile:1
# Targets: `service` (the default, last: what production runs) and `simulator` (the upstream stand-in, for compose).
# Every stage starts from the same pinned base: the runtime of .nvmrc on Debian bookworm, slim.

# Build: compile the service and the simulator with the dev dependencies, then set the service's part aside.
FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY dev ./dev
RUN npm run build && mkdir service && cp -r dist service/dist && rm -r service/dist/dev

# Production dependencies only, installed once for both targets.
FROM node:24.21.0-bookworm-slim AS production-deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund

# The upstream simulator and its identity provider: never in the service's image.
FROM node:24.21.0-bookworm-slim AS simulator
ENV SIM_HOST=0.0.0.0 SIM_PORT=4010
WORKDIR /app
COPY package.json ./
COPY --from=build /app/dist/dev ./dist/dev
COPY --chmod=0555 scripts/healthcheck.sh /usr/local/bin/healthcheck
USER 1000:1000
EXPOSE 4010
HEALTHCHECK --interval=5s --timeout=2s --retries=10 CMD ["healthcheck", "/__sim/stats", "4010"]
CMD ["node", "dist/dev/simulator-server.js"]

# The service: production dependencies and its compiled code, owned by root and read-only to the process,
# which runs as the numeric `node` user (so Kubernetes' runAsNonRoot can verify it) and writes no file.
FROM node:24.21.0-bookworm-slim AS service
ENV HOST=0.0.0.0 PORT=3000
# The heap sized from the container's memory limit, which Node reads from the cgroup: a quarter of it for V8's old
# generation (128 MiB under the manifest's 512Mi), and 16 MiB semi-spaces for the young one (48 MiB), whatever the
# limit. Node's own default in a container is half the limit and 1 MiB semi-spaces. See docs/operations.md, "Sizing".
ENV NODE_OPTIONS="--max-old-space-size-percentage=25 --max-semi-space-size=16"
WORKDIR /app
COPY package.json ./
COPY --from=production-deps /app/node_modules ./node_modules
COPY --from=build /app/service/dist ./dist
COPY --chmod=0555 scripts/healthcheck.sh /usr/local/bin/healthcheck
USER 1000:1000
EXPOSE 3000
# Liveness, through bash's /dev/tcp: ~3 ms and ~3 MB a probe, where `node -e fetch(...)` took ~140 ms and ~60 MB.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 CMD ["healthcheck", "/healthz"]
# The server handles SIGTERM itself (graceful shutdown), so it runs as PID 1 without a wrapper.
STOPSIGNAL SIGTERM
CMD ["node", "dist/server.js"]
