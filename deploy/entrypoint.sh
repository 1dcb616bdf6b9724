#!/bin/sh
# The modhost image's entrypoint (deploy/Containerfile): makes the home from
# what the image and the pod provide, then runs the command, by default
# `modhost mcp --http 0.0.0.0:8750`. It reads:
#
#   MODHOST_HOME                the home: audit log, module state, snapshots
#                               (an emptyDir in deploy/k8s/)
#   MODHOST_CONFIG_PARTS        files joined, in this order, into the home's
#                               config.toml (colon-separated): the ConfigMap's
#                               config.toml, then the Secret's tokens.toml
#                               ([[http.tokens]] entries); a missing part stops
#                               the start
#   MODHOST_SIGNING_KEY_SOURCE  the Secret's signing key: copied to a file of
#                               this user with mode 0400, which
#                               MODHOST_SIGNING_KEY_FILE then names (modhost
#                               refuses a key file others may read or that is
#                               a symbolic link, which a Secret volume's
#                               files are)
#   MODHOST_BUNDLED_MODULES     a folder of module folders to install
#                               (default /opt/modhost/modules, the image's)
#
# Every start writes config.toml and the key afresh, so a changed ConfigMap or
# Secret takes effect when a pod restarts. Each bundled module is installed
# once per home: install checks it and pins its bytes, so every replica
# started from one image serves the same approved module set.
set -eu

: "${MODHOST_HOME:?the modhost image needs MODHOST_HOME (its Containerfile sets it)}"
umask 077
mkdir -p "$MODHOST_HOME"

if [ -n "${MODHOST_CONFIG_PARTS:-}" ]; then
    config="$MODHOST_HOME/config.toml"
    : > "$config.new"
    old_ifs=$IFS
    IFS=:
    for part in $MODHOST_CONFIG_PARTS; do
        if [ ! -f "$part" ]; then
            echo "modhost-entrypoint: $part (named in MODHOST_CONFIG_PARTS) is not a file; mount it or remove it from the list" >&2
            exit 1
        fi
        cat "$part" >> "$config.new"
        printf '\n' >> "$config.new"
    done
    IFS=$old_ifs
    mv "$config.new" "$config"
fi

if [ -n "${MODHOST_SIGNING_KEY_SOURCE:-}" ]; then
    key="${MODHOST_SIGNING_KEY_FILE:-$(dirname "$MODHOST_HOME")/signing-key}"
    rm -f "$key"
    cat "$MODHOST_SIGNING_KEY_SOURCE" > "$key"
    chmod 0400 "$key"
    MODHOST_SIGNING_KEY_FILE=$key
    export MODHOST_SIGNING_KEY_FILE
fi

bundled="${MODHOST_BUNDLED_MODULES:-/opt/modhost/modules}"
if [ -d "$bundled" ]; then
    for module in "$bundled"/*/; do
        [ -d "$module" ] || continue
        id=$(basename "$module")
        if [ ! -e "$MODHOST_HOME/modules/$id" ]; then
            modhost --home "$MODHOST_HOME" install "$module" --id "$id" >&2
        fi
    done
fi

exec "$@"
