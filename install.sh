#!/bin/sh
# Installs Einsora on this machine in one command:
#   curl -fsSL https://einsora.com/install.sh | sh
#   curl -fsSL https://einsora.com/install.sh | sh -s -- --dry-run
#
# Finds this machine's OS, architecture and package manager; downloads the matching release
# artifact from EINSORA_INSTALL_BASE (default: the project's latest release) along with its
# SHA256SUMS; checks the artifact's SHA-256 before anything is installed or run; then installs
# the .deb (apt or dpkg), the .rpm (dnf, yum, zypper or rpm), or on macOS and Linux without
# either, the tarball into /usr/local. It prints the one next step.
#
#   --dry-run   fetch the checksum list, say what would be downloaded and run, change nothing
#
# EINSORA_INSTALL_BASE is a URL (or a directory, for a copy on disk) holding SHA256SUMS and the
# artifacts scripts/release makes: a mirror, or your own build.
set -eu

base=${EINSORA_INSTALL_BASE:-https://github.com/einsora/einsora/releases/latest/download}
base=${base%/}
dry_run=false

say() { printf '%s\n' "$*"; }
refuse() {
    printf 'einsora install: %s\n' "$*" >&2
    exit 1
}

for arg in "$@"; do
    case $arg in
    --dry-run) dry_run=true ;;
    -h | --help)
        say "install.sh [--dry-run]: installs Einsora for this machine from \$EINSORA_INSTALL_BASE"
        say "  (now $base), its SHA-256 checked first. --dry-run changes nothing."
        exit 0
        ;;
    *) refuse "unknown option $arg (--dry-run, --help)" ;;
    esac
done

# ---- what this machine is -------------------------------------------------------------------
os=$(uname -s)
machine=$(uname -m)
case $os in
Linux) ;;
Darwin) ;;
*) refuse "unsupported operating system $os: Einsora installs on Linux and macOS" ;;
esac
case $machine in
x86_64 | amd64) arch=x86_64 ;;
aarch64 | arm64) arch=aarch64 ;;
*) refuse "unsupported architecture $machine: Einsora is built for x86_64 and aarch64" ;;
esac

if [ "$os" = Darwin ]; then
    kind=tarball
    target=$arch-apple-darwin
elif command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    kind=deb
elif command -v rpm >/dev/null 2>&1 &&
    { command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1 || command -v zypper >/dev/null 2>&1; }; then
    kind=rpm
else
    kind=tarball
    target=$arch-unknown-linux-gnu
fi
case $kind in
deb)
    case $arch in x86_64) deb_arch=amd64 ;; aarch64) deb_arch=arm64 ;; esac
    pattern="einsora_*_$deb_arch.deb"
    ;;
rpm) pattern="einsora-*-1.$arch.rpm" ;;
tarball) pattern="einsora-*-$target.tar.gz" ;;
esac

if [ "$(id -u)" -eq 0 ]; then
    as_root=''
elif command -v sudo >/dev/null 2>&1; then
    as_root=sudo
else
    refuse "installing needs root: run it as root, or install sudo"
fi

# ---- downloads: nothing fetched is run or installed before its checksum matches ---------------
if command -v curl >/dev/null 2>&1; then
    fetch() { curl --fail --silent --show-error --location --proto '=https,http,file' -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
    fetch() { wget -q -O "$2" "$1"; }
else
    refuse "neither curl nor wget is installed: install one of them first"
fi
case $base in
/*) base=file://$base ;;
esac
sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        refuse "no sha256sum or shasum to check the download with"
    fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/einsora-install.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

fetch "$base/SHA256SUMS" "$work/SHA256SUMS" 2>"$work/err" ||
    refuse "can't download $base/SHA256SUMS: $(tail -n 1 "$work/err")"

# The one artifact for this machine: a plain file name (no path), exactly one.
found=$(awk -v p="$pattern" '
    BEGIN { gsub(/\./, "\\.", p); gsub(/\*/, "[0-9A-Za-z.+~]+", p); p = "^" p "$" }
    NF == 2 && $1 ~ /^[0-9a-f]+$/ && length($1) == 64 { f = $2; sub(/^\*/, "", f); if (f ~ p) print $1, f }
' "$work/SHA256SUMS")
count=$(printf '%s' "$found" | grep -c . || true)
[ "$count" -ge 1 ] || refuse "$base has no $kind for $os $arch (none named $pattern in SHA256SUMS)"
[ "$count" -eq 1 ] || refuse "$base lists more than one $pattern in SHA256SUMS"
expected=${found%% *}
file=${found#* }

case $kind in
deb)
    if command -v apt-get >/dev/null 2>&1; then
        install_cmd="$as_root apt-get install -y $work/$file"
    else
        install_cmd="$as_root dpkg -i $work/$file"
    fi
    next="sudo einsora setup --email you@example.com"
    ;;
rpm)
    if command -v dnf >/dev/null 2>&1; then
        install_cmd="$as_root dnf install -y $work/$file"
    elif command -v yum >/dev/null 2>&1; then
        install_cmd="$as_root yum install -y $work/$file"
    else
        install_cmd="$as_root zypper --non-interactive install $work/$file"
    fi
    next="sudo einsora setup --email you@example.com"
    ;;
tarball)
    install_cmd="copy bin/ and share/ from $file into /usr/local"
    next="einsora setup --email you@example.com, then einsora up"
    ;;
esac

if $dry_run; then
    say "would download $base/$file"
    say "would check its SHA-256 is $expected"
    say "would run: $install_cmd"
    say "then: $next"
    exit 0
fi

say "Downloading $file"
fetch "$base/$file" "$work/$file" 2>"$work/err" ||
    refuse "can't download $base/$file: $(tail -n 1 "$work/err"); nothing was installed"
actual=$(sha256_of "$work/$file")
[ "$actual" = "$expected" ] ||
    refuse "checksum mismatch for $file: expected $expected, got $actual; nothing was installed"

case $kind in
deb | rpm)
    chmod 0644 "$work/$file"
    chmod 0755 "$work"
    # apt reads a local package as the _apt user: it must be able to reach it.
    $install_cmd
    ;;
tarball)
    mkdir "$work/unpacked"
    tar -xzf "$work/$file" -C "$work/unpacked"
    top="$work/unpacked/${file%.tar.gz}"
    [ -x "$top/bin/einsora" ] || refuse "$file doesn't hold bin/einsora; nothing was installed"
    $as_root mkdir -p /usr/local/bin /usr/local/share
    $as_root cp "$top/bin/einsora" /usr/local/bin/einsora
    $as_root cp -R "$top/share/." /usr/local/share/
    if [ "$os" = Darwin ]; then
        agents="$HOME/Library/LaunchAgents"
        logs="$HOME/Library/Logs/Einsora"
        mkdir -p "$agents" "$logs"
        sed -e "s|@BINARY@|/usr/local/bin/einsora|" -e "s|@LOGS@|$logs|" \
            "$top/share/einsora/com.einsora.up.plist" >"$agents/com.einsora.up.plist"
        next="$next (or, as a login service: launchctl bootstrap gui/$(id -u) $agents/com.einsora.up.plist)"
    fi
    ;;
esac

say "Einsora $(einsora --version 2>/dev/null | cut -d' ' -f2) is installed. Next:"
say "    $next"
