#!/usr/bin/env bash
# Certificates of the control channel between gateways and exec-hosts (docs/operator-guide.md,
# "Several exec-hosts"; docs/decisions/0010-exec-host-pool.md):
#   make-certs.sh OUTDIR HOST_ID [HOST_ID…]
# makes, in OUTDIR,
#   ca.pem, ca-key.pem              a CA (kept when it exists: run again to add hosts)
#   gateway.pem, gateway-key.pem    the gateway's client certificate (CN=lemniscate-gateway)
#   HOST_ID.pem, HOST_ID-key.pem    each exec-host's certificate (CN=HOST_ID; DNS:HOST_ID, DNS:localhost,
#                                   IP:127.0.0.1 and any names in LEMNISCATE_CERT_EXTRA_SANS, e.g.
#                                   "DNS:exec-1.example.org,IP:10.0.0.5")
# Keys are created 0600. Existing certificates are kept; remove one to make it again.
set -euo pipefail

usage() {
  echo "usage: $0 OUTDIR HOST_ID [HOST_ID…]   (HOST_ID: a lower-case DNS name)" >&2
  exit 2
}
[ "$#" -ge 2 ] || usage
command -v openssl >/dev/null || { echo "make-certs.sh needs openssl on the PATH." >&2; exit 1; }

OUT=$1
shift
DAYS=${LEMNISCATE_CERT_DAYS:-825}
CLIENT_NAME=${LEMNISCATE_CERT_GATEWAY_NAME:-lemniscate-gateway}
for id in "$@"; do
  if [ ${#id} -gt 253 ] || ! [[ "$id" =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$ ]]; then
    echo "\"$id\" is not an exec-host id: a lower-case DNS name (labels of letters, digits or -, not at either end, joined by .)." >&2
    exit 2
  fi
  if [ "$id" = "ca" ] || [ "$id" = "gateway" ]; then
    echo "\"$id\" names the CA's or the gateway's files; choose another exec-host id." >&2
    exit 2
  fi
done

umask 077
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; chmod 600 "$1"; }

if [ -f "$OUT/ca.pem" ] && [ -f "$OUT/ca-key.pem" ]; then
  echo "Keeping the CA in $OUT/ca.pem."
else
  key "$OUT/ca-key.pem"
  openssl req -x509 -new -key "$OUT/ca-key.pem" -sha256 -days "$DAYS" -subj "/CN=Lemniscate exec-host CA" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$OUT/ca.pem"
  chmod 644 "$OUT/ca.pem"
  echo "Made a CA: $OUT/ca.pem (keep $OUT/ca-key.pem offline)."
fi

# sign NAME CN EXTENDED_USAGE SANS
sign() {
  local name=$1 cn=$2 usage=$3 sans=$4
  if [ -f "$OUT/$name.pem" ] && [ -f "$OUT/$name-key.pem" ]; then
    echo "Keeping $OUT/$name.pem."
    return
  fi
  key "$OUT/$name-key.pem"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$WORK/$name.ext"
  openssl req -new -key "$OUT/$name-key.pem" -subj "/CN=$cn" -out "$WORK/$name.csr"
  openssl x509 -req -in "$WORK/$name.csr" -CA "$OUT/ca.pem" -CAkey "$OUT/ca-key.pem" -CAcreateserial -CAserial "$WORK/ca.srl" \
    -days "$DAYS" -sha256 -extfile "$WORK/$name.ext" -out "$OUT/$name.pem" 2>/dev/null
  chmod 644 "$OUT/$name.pem"
  echo "Made $OUT/$name.pem (CN=$cn)."
}

sign gateway "$CLIENT_NAME" clientAuth ""
for id in "$@"; do
  sans="DNS:$id,DNS:localhost,IP:127.0.0.1"
  [ -n "${LEMNISCATE_CERT_EXTRA_SANS:-}" ] && sans="$sans,$LEMNISCATE_CERT_EXTRA_SANS"
  sign "$id" "$id" serverAuth,clientAuth "$sans"
done
