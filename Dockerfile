# hostd in a container: Debian with QEMU inside. Pass /dev/kvm through when
# the host has it (docker run --device /dev/kvm); without it QEMU runs under
# TCG. Image building (debootstrap) needs root in the container:
#   docker build -t warmdesk .
#   docker run --rm -it --device /dev/kvm -p 127.0.0.1:8787:8787 \
#     -v warmdesk-state:/var/lib/warmdesk -v warmdesk-cache:/var/cache/warmdesk \
#     --cap-add SYS_ADMIN warmdesk
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -o /out/hostd ./hostd

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends qemu-system-x86 qemu-utils debootstrap e2fsprogs ca-certificates npm \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/hostd /usr/local/bin/hostd
COPY web/package.json web/package-lock.json /opt/warmdesk/web/
RUN cd /opt/warmdesk/web && npm ci --no-audit --no-fund \
 && mkdir -p /opt/warmdesk/web/static/vendor && cp -r node_modules/@novnc/novnc /opt/warmdesk/web/static/vendor/novnc
ENV WARMDESK_LISTEN=0.0.0.0:8787 WARMDESK_WEB_DIR=/opt/warmdesk/web
EXPOSE 8787
# Build and bake the default image on first start (cached in the volume), then serve.
CMD ["sh", "-c", "hostd image build --flavor minimal && hostd snapshot bake --image minimal --if-missing && exec hostd serve"]
