# voxedge on Bun, the main runtime. Build: docker build -t voxedge .
# Run:   docker run -p 8000:8000 -v voxedge-models:/data/models -v voxedge-speakers:/data/speakers voxedge
# Home Assistant (Wyoming, docs/home-assistant.md): add -p 10200:10200 -e VOXEDGE_WYOMING_PORT=10200; discovery
# (-e VOXEDGE_WYOMING_ZEROCONF=true) needs multicast, so --network host instead of -p.
#
# Production dependencies exactly as locked (npm ci --omit=dev), installed in a Node stage because the Bun
# image has no npm; --ignore-scripts skips the postinstall, which only installs Mesa's software GPU drivers
# (not needed in a container: a real GPU needs its own runtime, the offline and CPU paths need nothing).
FROM node:22-bookworm-slim AS dependencies
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM oven/bun:1.4.5-debian
WORKDIR /app
COPY --from=dependencies /app/node_modules ./node_modules
COPY package.json deno.json ./
COPY src ./src
COPY kernels ./kernels
COPY public ./public
# Bundles pulled with `models pull` and uploaded voices live on volumes, owned by the image's non-root user.
ENV VOXEDGE_HOST=0.0.0.0 \
    VOXEDGE_PORT=8000 \
    VOXEDGE_MODEL_CACHE_DIR=/data/models \
    SPEAKER_SAMPLES_DIR=/data/speakers
RUN mkdir -p /data/models /data/speakers && chown -R bun:bun /data
USER bun
VOLUME ["/data/models", "/data/speakers"]
# 8000: HTTP; 10200: Wyoming, the customary port, served only when VOXEDGE_WYOMING_PORT is set.
EXPOSE 8000 10200
# Liveness: 503 while the model loads (hence the start period) or after it failed; --protect-health needs
# the key here too. Load balancers should use /health/ready instead.
HEALTHCHECK --interval=15s --timeout=3s --start-period=120s --retries=3 \
  CMD ["bun", "-e", "const r = await fetch(`http://127.0.0.1:${process.env.VOXEDGE_PORT ?? 8000}/health`).catch(() => undefined); process.exit(r?.ok ? 0 : 1)"]
# SIGTERM drains (docs/deploying.md): give `docker stop -t` more than --shutdown-grace (25 s).
STOPSIGNAL SIGTERM
CMD ["bun", "src/main.ts", "serve"]
