# syntax=docker/dockerfile:1
# Build stage: compile TypeScript (the service and the upstream simulator) with the dev dependencies.
FROM node:24.21.0-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY dev ./dev
RUN npm run build

# Runtime stage: production dependencies and the compiled code only, owned by root, run as `node`.
FROM node:24.21.0-bookworm-slim
ENV HOST=0.0.0.0 PORT=3000
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
# Liveness. The server handles SIGTERM itself (graceful shutdown), so it runs as PID 1 without a wrapper.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
CMD ["node", "dist/server.js"]
