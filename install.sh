#!/bin/sh
# Installs Einsora on this machine in one command:
#   curl -fsSL https://github.com/einsora/einsora/releases/latest/download/install.sh | sh
#   ... | sh -s -- --dry-run
#
# Finds this machine's OS, architecture and package manager; downloads the matching release
# artifact from EINSORA_INSTALL_BASE (default: the project's latest release) along with its
# SHA256SUMS; checks the artifact's SHA-256 before anything is installed or run; then installs
# the .deb (apt), the .rpm (dnf, yum or zypper), or on macOS and Linux without either, the
# tarball into /usr/local. It prints the one next step.
#
#   --dry-run   fetch the checksum list, say what would be downloaded and run, change nothing
#
# EINSORA_INSTALL_BASE holds SHA256SUMS and the artifacts scripts/release makes: an https://
# URL (a mirror), an absolute directory (your own build), or http:// on this machine only.
#
# Everything is in main, called on the last line: a download cut short runs nothing.
set -eu

say() { printf '%s\n' "$*"; }
refuse() {
    printf 'einsora install: %s\n' "$*" >&2
    exit 1
}

# ---- what this machine is ---------------------------------------------------------------------
detect() {
    os=$(uname -s)
    machine=$(uname -m)
    case $os in
    Linux | Darwin) ;;
    *) refuse "unsupported operating system $os: Einsora installs on Linux and macOS" ;;
    esac
    case $machine in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    *) refuse "unsupported architecture $machine: Einsora is built for x86_64 and aarch64" ;;
    esac
    if [ "$os" = Darwin ]; then
        kind=tarball
        pattern="einsora-*-$arch-apple-darwin.tar.gz"
    elif command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
        kind=deb
        # dpkg's own architecture: an armhf userland on an aarch64 kernel is not arm64.
        pattern="einsora_*_$(dpkg --print-architecture).deb"
    elif command -v rpm >/dev/null 2>&1 &&
        { command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1 || command -v zypper >/dev/null 2>&1; }; then
        kind=rpm
        pattern="einsora-*-1.$arch.rpm"
    else
        kind=tarball
        pattern="einsora-*-$arch-unknown-linux-gnu.tar.gz"
    fi
}

# ---- where artifacts come from ------------------------------------------------------------------
# Sets `fetch SOURCE DEST`: a copy from a directory, or a download over https (http only from
# this machine: the checksums travel the same way as the artifacts, so a network path where
# anyone can change one can change both).
choose_source() {
    case $base in
    /*)
        [ -d "$base" ] || refuse "EINSORA_INSTALL_BASE $base is not a directory"
        fetch() { cp "$1" "$2"; }
        return
        ;;
    https://*) ;;
    http://127.0.0.1[:/]* | http://localhost[:/]* | http://\[::1\][:/]*) ;;
    http://*) refuse "EINSORA_INSTALL_BASE $base: plain http only from this machine (127.0.0.1, localhost); use https:// or a directory" ;;
    *) refuse "EINSORA_INSTALL_BASE $base: an https:// URL or an absolute directory" ;;
    esac
    if command -v curl >/dev/null 2>&1; then
        fetch() { curl --fail --silent --show-error --location --proto '=https,http' --proto-redir '=https' -o "$2" "$1"; }
    elif command -v wget >/dev/null 2>&1; then
        fetch() { wget -q -O "$2" "$1"; }
    else
        refuse "neither curl nor wget is installed: install one of them first"
    fi
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    elif command -v shasum >/dev/null 2>&1; then
        shasum -a 256 "$1" | cut -d' ' -f1
    else
        refuse "no sha256sum or shasum to check the download with"
    fi
}

# The one artifact for this machine in SHA256SUMS: lowercase hex, a plain file name (no path)
# matching the pattern, exactly one. Sets `expected` and `file`.
pick() {
    found=$(LC_ALL=C awk -v p="$pattern" '
        BEGIN { gsub(/\./, "\\.", p); gsub(/\*/, "[0-9A-Za-z.+~]+", p); p = "^" p "$" }
        NF == 2 && $1 ~ /^[0-9a-f]+$/ && length($1) == 64 { f = $2; sub(/^\*/, "", f); if (f ~ p) print $1, f }
    ' "$work/SHA256SUMS")
    count=$(printf '%s' "$found" | grep -c . || true)
    [ "$count" -ge 1 ] || refuse "$base has no $kind for $os $arch (none named $pattern in SHA256SUMS)"
    [ "$count" -eq 1 ] || refuse "$base lists more than one $pattern in SHA256SUMS"
    expected=${found%% *}
    file=${found#* }
}

# Runs its arguments as root (sudo when not root).
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    else
        sudo "$@"
    fi
}

# Installs the verified $work/$file. The package's scripts run `einsora migrate`, which refuses
# an EINSORA_* of the caller's (the service reads its own file): this script's is left out.
install_artifact() {
    case $kind in
    deb)
        # apt reads a local package as its _apt user, and a changed settings file is kept
        # (the new one lands beside it as .dpkg-dist) rather than asked about on a terminal
        # this script may not have.
        chmod 0755 "$work"
        chmod 0644 "$work/$file"
        as_root env -u EINSORA_INSTALL_BASE DEBIAN_FRONTEND=noninteractive apt-get install -y \
            -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
            "$work/$file" </dev/null
        ;;
    rpm)
        chmod 0755 "$work"
        chmod 0644 "$work/$file"
        if command -v dnf >/dev/null 2>&1; then
            as_root env -u EINSORA_INSTALL_BASE dnf install -y "$work/$file" </dev/null
        elif command -v yum >/dev/null 2>&1; then
            as_root env -u EINSORA_INSTALL_BASE yum install -y "$work/$file" </dev/null
        else
            as_root env -u EINSORA_INSTALL_BASE zypper --non-interactive install --allow-unsigned-rpm "$work/$file" </dev/null
        fi
        ;;
    tarball)
        mkdir "$work/unpacked"
        tar -xzf "$work/$file" -C "$work/unpacked"
        top="$work/unpacked/${file%.tar.gz}"
        [ -x "$top/bin/einsora" ] || refuse "$file doesn't hold bin/einsora; nothing was installed"
        as_root mkdir -p /usr/local/bin /usr/local/share
        # Beside the old binary, then renamed over it: a running einsora keeps its own.
        as_root cp "$top/bin/einsora" /usr/local/bin/.einsora.new
        as_root mv -f /usr/local/bin/.einsora.new /usr/local/bin/einsora
        as_root cp -R "$top/share/." /usr/local/share/
        if [ "$os" = Darwin ]; then
            launch_agent "$top"
        fi
        ;;
    esac
}

# macOS: the launchd agent for this user, from the tarball's template.
launch_agent() {
    agents="$HOME/Library/LaunchAgents"
    logs="$HOME/Library/Logs/Einsora"
    mkdir -p "$agents" "$logs"
    # A home directory's name may hold what sed or XML treat specially.
    escaped=$(printf '%s' "$logs" | sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/[\\|&]/\\&/g')
    sed -e "s|@BINARY@|/usr/local/bin/einsora|" -e "s|@LOGS@|$escaped|" \
        "$1/share/einsora/com.einsora.up.plist" >"$agents/com.einsora.up.plist"
    next="$next (or, at every login: launchctl bootstrap gui/$(id -u) $agents/com.einsora.up.plist)"
}

main() {
    dry_run=false
    for arg in "$@"; do
        case $arg in
        --dry-run) dry_run=true ;;
        -h | --help)
            say "install.sh [--dry-run]: installs Einsora for this machine from \$EINSORA_INSTALL_BASE"
            say "  (default: the latest release), its SHA-256 checked first. --dry-run changes nothing."
            exit 0
            ;;
        *) refuse "unknown option $arg (--dry-run, --help)" ;;
        esac
    done
    base=${EINSORA_INSTALL_BASE:-https://github.com/einsora/einsora/releases/latest/download}
    base=${base%/}
    detect
    # A launchd agent is the user's own: installed as root, it would be root's.
    if [ "$os" = Darwin ] && [ "$(id -u)" -eq 0 ]; then
        refuse "on macOS, run it as your own user (it asks for sudo to write /usr/local)"
    fi
    choose_source
    if ! $dry_run && [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        refuse "installing needs root: run it as root, or install sudo"
    fi

    work=$(mktemp -d "${TMPDIR:-/tmp}/einsora-install.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    trap 'exit 130' INT TERM

    fetch "$base/SHA256SUMS" "$work/SHA256SUMS" 2>"$work/err" ||
        refuse "can't download $base/SHA256SUMS: $(tail -n 1 "$work/err")"
    pick
    case $kind in
    deb | rpm)
        installer="the $kind with $(for m in apt-get dnf yum zypper; do command -v $m >/dev/null 2>&1 && { echo $m; break; }; done)"
        next="sudo einsora setup --email you@example.com"
        ;;
    tarball)
        installer="bin/ and share/ copied into /usr/local"
        next="einsora setup --email you@example.com, then einsora up"
        ;;
    esac

    if $dry_run; then
        say "would download $base/$file"
        say "would check its SHA-256 is $expected"
        say "would install $installer"
        say "then: $next"
        exit 0
    fi

    say "Downloading $file"
    fetch "$base/$file" "$work/$file" 2>"$work/err" ||
        refuse "can't download $base/$file: $(tail -n 1 "$work/err"); nothing was installed"
    actual=$(sha256_of "$work/$file")
    [ "$actual" = "$expected" ] ||
        refuse "checksum mismatch for $file: expected $expected, got $actual; nothing was installed"
    install_artifact

    case $kind in
    tarball) installed=/usr/local/bin/einsora ;;
    *) installed=/usr/bin/einsora ;;
    esac
    say "$("$installed" --version 2>/dev/null || echo einsora) is installed. Next:"
    say "    $next"
}

main "$@"
