#!/usr/bin/env bash
# Tests tests/setup/deps.sh's Go toolchain bootstrap, as root, on a host that
# reaches the Go module proxy. Every case runs with a PATH stripped of every go
# and a private AWF_GO_CACHE in a temporary directory:
#   fresh        no go on PATH: the exact toolchain go.mod names is fetched,
#                verified and installed; it runs, builds a cgo program, and a
#                second run changes nothing
#   suitable     a suitable go on PATH is kept: nothing is fetched
#   tampered     an older go on PATH and a proxy that serves a forged module
#                zip (the checksum database is the real one): the install
#                fails with the checksum database's mismatch, leaves nothing
#   unreachable  a proxy that does not answer: a clear failure, leaves nothing
# The bootstrap go is $AWF_BOOTSTRAP_GO (default: the go on this PATH), so the
# test installs no package; tests/setup/fresh_host.sh covers a distribution
# bootstrap go on fresh Debian and Ubuntu trees.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
deps=$here/tests/setup/deps.sh
boot=${AWF_BOOTSTRAP_GO:-$(command -v go || true)}
[ -n "$boot" ] && [ -x "$boot" ] || { echo "deps_test: FAIL: no bootstrap go (set AWF_BOOTSTRAP_GO)" >&2; exit 1; }
want=$(sed -n 's/^go[[:space:]]\{1,\}\([0-9][^[:space:]]*\).*/go\1/p' "$here/go.mod" | head -n1)
if t=$(sed -n 's/^toolchain[[:space:]]\{1,\}\(go[^[:space:]]*\).*/\1/p' "$here/go.mod" | head -n1) && [ -n "$t" ]; then want=$t; fi

tmp=$(mktemp -d /var/tmp/awf-deps-test.XXXXXX)
proxy_pid=
cleanup() {
  if [ -n "$proxy_pid" ]; then kill "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true; fi
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# A PATH with no go on it.
clean_path=
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && [ ! -e "$d/go" ] && clean_path=${clean_path:+$clean_path:}$d
done

fails=0
pass() { echo "--- PASS: $1"; }
fail() { echo "--- FAIL: $1: $2"; fails=$((fails + 1)); }

# run_deps CACHE PATH [VAR=VALUE...] runs deps.sh toolchain in a clean
# environment; its output is in $out, its status in $rc.
run_deps() {
  local cache=$1 path=$2
  shift 2
  rc=0
  out=$(env -i HOME="$tmp/home" PATH="$path" AWF_GO_CACHE="$cache" AWF_BOOTSTRAP_GO="$boot" "$@" \
    bash "$deps" toolchain 2>&1) || rc=$?
}
mkdir -p "$tmp/home"

# fresh
cache=$tmp/fresh
run_deps "$cache" "$clean_path"
if [ $rc -ne 0 ]; then
  fail fresh "deps.sh exited $rc: $out"
elif ! grep -q "verified golang.org/toolchain@v0.0.1-$want.linux-.* h1:" <<<"$out"; then
  fail fresh "no verified hash in: $out"
elif [ "$(readlink "$cache/bin")" != "$want/bin" ]; then
  fail fresh "$cache/bin does not point at $want/bin"
elif [ "$("$cache/bin/go" env GOVERSION)" != "$want" ] || [ "$("$cache/bin/go" env GOROOT)" != "$cache/$want" ]; then
  fail fresh "installed go reports $("$cache/bin/go" env GOVERSION) at $("$cache/bin/go" env GOROOT)"
elif ls -d "$cache"/.fetch.* >/dev/null 2>&1; then
  fail fresh "the download's scratch directory was left"
else
  mkdir -p "$tmp/hello"
  printf 'module hello\n\ngo 1.21\n' >"$tmp/hello/go.mod"
  printf 'package main\n\n// int one(void) { return 1; }\nimport "C"\nimport "fmt"\n\nfunc main() { fmt.Println("hello", C.one()) }\n' >"$tmp/hello/main.go"
  hello=$(cd "$tmp/hello" && env -i HOME="$tmp/home" PATH="$cache/bin:$clean_path" GOTOOLCHAIN=local CGO_ENABLED=1 \
    GOFLAGS=-modcacherw GOPATH="$tmp/gopath" go run . 2>&1) || true
  if [ "$hello" != "hello 1" ]; then
    fail fresh "the installed go does not build a cgo program: $hello"
  else
    run_deps "$cache" "$clean_path"
    if [ $rc -ne 0 ] || [ -n "$out" ]; then fail fresh "a second run was not a silent no-op (rc $rc): $out"; else pass fresh; fi
  fi
fi

# suitable
cache=$tmp/suitable
run_deps "$cache" "$(dirname "$boot"):$clean_path"
if [ "$(cd / && GOTOOLCHAIN=local "$boot" env GOVERSION)" != "$want" ]; then
  fail suitable "the bootstrap go $boot is not $want: this case needs a suitable go"
elif [ $rc -ne 0 ] || [ -n "$out" ] || [ -e "$cache" ]; then
  fail suitable "a suitable go on PATH was not kept (rc $rc, cache $(ls "$cache" 2>/dev/null | tr '\n' ' ')): $out"
else
  pass suitable
fi

# tampered: a proxy on loopback that forwards everything to the real proxy
# except the module zip, which it forges (a valid module zip with another
# bin/go). An older go is first on PATH.
mkdir -p "$tmp/old"
printf '#!/bin/sh\necho "go version go1.19.8 linux/amd64"\n' >"$tmp/old/go"
chmod +x "$tmp/old/go"
cat >"$tmp/proxy.py" <<'EOF'
import http.server, io, sys, urllib.request, zipfile
UPSTREAM = "https://proxy.golang.org"
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.startswith("/golang.org/toolchain/@v/") and self.path.endswith(".zip"):
            ver = self.path.rsplit("/", 1)[1][:-4]
            buf = io.BytesIO()
            with zipfile.ZipFile(buf, "w") as z:
                z.writestr("golang.org/toolchain@%s/bin/go" % ver, "#!/bin/sh\necho forged\n")
                z.writestr("golang.org/toolchain@%s/go.mod" % ver, "module golang.org/toolchain\n")
            body = buf.getvalue()
            code = 200
        else:
            try:
                with urllib.request.urlopen(UPSTREAM + self.path, timeout=60) as r:
                    body, code = r.read(), r.status
            except urllib.error.HTTPError as e:
                body, code = e.read(), e.code
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
EOF
python3 "$tmp/proxy.py" >"$tmp/proxy.port" 2>"$tmp/proxy.log" &
proxy_pid=$!
for _ in $(seq 50); do [ -s "$tmp/proxy.port" ] && break; sleep 0.1; done
port=$(head -n1 "$tmp/proxy.port" 2>/dev/null || true)
cache=$tmp/tampered
if [ -z "$port" ]; then
  fail tampered "the forging proxy did not start: $(cat "$tmp/proxy.log")"
else
  run_deps "$cache" "$tmp/old:$clean_path" GOPROXY="http://127.0.0.1:$port"
  if [ $rc -eq 0 ]; then
    fail tampered "a forged toolchain was accepted: $out"
  elif ! grep -q "checksum mismatch" <<<"$out" || ! grep -q "SECURITY ERROR" <<<"$out"; then
    fail tampered "the failure is not the checksum database's mismatch: $out"
  elif ! grep -q "go on PATH is go1.19.8" <<<"$out"; then
    fail tampered "the older go on PATH was not reported: $out"
  elif [ -e "$cache/$want" ] || [ -e "$cache/bin" ] || ls -d "$cache"/.fetch.* >/dev/null 2>&1; then
    fail tampered "a failed install left $(ls -a "$cache" | tr '\n' ' ')"
  else
    pass tampered
  fi
fi
kill "$proxy_pid" 2>/dev/null || true
wait "$proxy_pid" 2>/dev/null || true
proxy_pid=

# unreachable: nothing listens on port 9 of loopback.
cache=$tmp/unreachable
run_deps "$cache" "$clean_path" GOPROXY=http://127.0.0.1:9
if [ $rc -eq 0 ]; then
  fail unreachable "deps.sh succeeded without a proxy: $out"
elif ! grep -q "could not download and verify golang.org/toolchain@v0.0.1-$want" <<<"$out" || ! grep -q "127.0.0.1:9" <<<"$out"; then
  fail unreachable "the failure does not name the module and the proxy: $out"
elif [ -e "$cache/$want" ] || ls -d "$cache"/.fetch.* >/dev/null 2>&1; then
  fail unreachable "a failed install left $(ls -a "$cache" | tr '\n' ' ')"
else
  pass unreachable
fi

if [ $fails -ne 0 ]; then echo "FAIL ($fails)"; exit 1; fi
echo PASS
