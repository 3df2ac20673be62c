# shellcheck shell=bash disable=SC2154 # cache, log and sha are images/build's
# Sourced by images/build: the `vm-tiny` stage.
#
# vm-tiny: a small test guest for the libvirt driver, as CirrOS is for OpenStack: Debian's
# cloud kernel, busybox and Dropbear, booted in a few seconds even under qemu's emulation, so
# the tests and the bench boot a real guest quickly. $cache/vm-tiny links to
# vm-tiny-<inputs hash> (replaced at once by a rebuild, which deletes the older ones):
#   vmlinuz, initrd.img   the kernel and the whole system as an initramfs (busybox init)
#   disk.qcow2            a 64 MiB ext4 disk (no partition table) mounted at /disk: the home of
#                         user `einsora` (/disk/home/einsora) and the SSH host key, kept across
#                         boots; everything else is the initramfs, new at each boot
#   inputs                this recipe's hash; the stage is skipped while it matches
# It keeps the guest's contract of build_vm_debian (images/build), but has no cloud-init: its
# init reads the NoCloud seed Einsora writes (agent/src/drivers/libvirt/seed.rs) itself, only
# its shapes: meta-data's `einsora-token:` line, and user-data's keys as the JSON strings under
# `ssh_authorized_keys:`. The user `einsora` has no password and no sudo.
build_vm_tiny() {
  local hash; hash=$(declare -f build_vm_tiny vm_tiny_modules vm_tiny_guest | sha)
  local link=$cache/vm-tiny out=$cache/vm-tiny-$hash
  if [[ $(cat "$link/inputs" 2>/dev/null) == "$hash" ]]; then log "vm-tiny: cached"; return; fi
  local work=$cache/vm-tiny.work log=$cache/build-vm-tiny.log
  local debs=$work/debs # this build's packages only: a rebuild never unpacks an older one
  rm -rf "$work" "$out.tmp"
  mkdir -p "$debs" "$work/pkgs" "$work/initramfs" "$work/disk" "$out.tmp"
  # The cloud kernel's own package: the metapackage only depends on it.
  local kernel_pkg
  kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  if [[ -z $kernel_pkg ]]; then
    apt-get update -q >/dev/null
    kernel_pkg=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
  fi
  log "vm-tiny: $kernel_pkg, busybox-static, dropbear-bin (from Debian)"
  (cd "$debs" && apt-get download "$kernel_pkg" busybox-static dropbear-bin libtomcrypt1 libtommath1 >"$log" 2>&1) \
    || { tail -n 20 "$log" >&2; return 1; }
  local deb
  for deb in "$debs"/*.deb; do dpkg -x "$deb" "$work/pkgs"; done
  local version=${kernel_pkg#linux-image-}
  install -m 0644 "$work/pkgs/boot/vmlinuz-$version" "$out.tmp/vmlinuz"
  vm_tiny_guest "$work/pkgs" "$work/initramfs" "$work/disk" "$version" || return 1
  (cd "$work/initramfs" && find . -print0 | cpio --null -o -H newc --quiet | gzip -1) >"$out.tmp/initrd.img"
  truncate -s 64M "$work/disk.raw"
  mkfs.ext4 -q -L einsora-disk -d "$work/disk" "$work/disk.raw" >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; return 1; }
  qemu-img convert -f raw -O qcow2 "$work/disk.raw" "$out.tmp/disk.qcow2"
  echo "$hash" >"$out.tmp/inputs"
  rm -rf "$work" "$out"
  mv "$out.tmp" "$out"
  [[ -L $link || ! -e $link ]] || rm -rf "$link"
  ln -sfn "vm-tiny-$hash" "$link.new" && mv -T "$link.new" "$link"
  local d
  for d in "$cache"/vm-tiny-*; do [[ $d == "$out" ]] || rm -rf "$d"; done
}

# vm_tiny_modules PKGS VERSION MODULE...: the module files MODULE needs, dependencies first,
# from each module's own `depends=` (no depmod on the build machine).
vm_tiny_modules() {
  local pkgs=$1 version=$2 m file dep
  shift 2
  local dir=$pkgs/lib/modules/$version
  for m in "$@"; do
    grep -qE "/${m//_/[-_]}\.ko$" "$dir/modules.builtin" && continue
    file=$(find "$dir/kernel" -name "${m//_/[-_]}.ko" | head -n 1)
    [[ -n $file ]] || { echo "vm-tiny: no module $m in $version" >&2; return 1; }
    for dep in $(tr '\0' '\n' <"$file" | sed -n 's/^depends=//p' | tr ',' ' '); do
      vm_tiny_modules "$pkgs" "$version" "$dep" || return 1
    done
    echo "${file#"$dir/"}"
  done
}

# vm_tiny_guest PKGS INITRAMFS DISK VERSION: the guest's files.
vm_tiny_guest() {
  local pkgs=$1 root=$2 disk=$3 version=$4
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,lib64,etc/acpi/PWRF,proc,sys,dev,run,tmp,disk,lib/einsora}
  install -m 0755 "$pkgs/bin/busybox" "$root/bin/busybox"
  local applet
  for applet in $("$root/bin/busybox" --list); do
    [[ -e $root/bin/$applet ]] || ln -s busybox "$root/bin/$applet"
  done
  ln -s ../bin/busybox "$root/sbin/init"
  ln -s bin/busybox "$root/init"
  # Dropbear and the libraries it links: its own from its packages, the rest from this
  # (Debian 12) machine's, which are the same release's.
  install -m 0755 "$pkgs/usr/sbin/dropbear" "$root/usr/sbin/dropbear"
  install -m 0755 "$pkgs/usr/bin/dropbearkey" "$root/usr/bin/dropbearkey"
  local lib
  for lib in $(LD_LIBRARY_PATH=$pkgs/usr/lib/x86_64-linux-gnu ldd "$pkgs/usr/sbin/dropbear" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\/lib64/ { print $1 }'); do
    local at=${lib#"$pkgs"} # where the guest finds it
    mkdir -p "$root$(dirname "$at")"
    cp -L "$lib" "$root$at"
  done
  # The modules for its disks, its channels, its seed and its power button.
  local mods=$root/lib/modules/$version
  local m modules
  # Assigned first: a module missing fails the build (a `for` over $(...) would hide it).
  modules=$(vm_tiny_modules "$pkgs" "$version" virtio_pci virtio_blk virtio_console virtio_scsi sr_mod isofs button evdev) || return 1
  while read -r m; do
    install -D -m 0644 "$pkgs/lib/modules/$version/$m" "$mods/$m"
    echo "$m" >>"$root/lib/einsora/modules"
  done < <(awk '!seen[$0]++' <<<"$modules")

  printf 'root:x:0:0:root:/root:/bin/sh\neinsora:x:1000:1000:Einsora:/disk/home/einsora:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:*:1::::::\neinsora:*:1::::::\n' >"$root/etc/shadow"
  chmod 0600 "$root/etc/shadow"
  printf 'root:x:0:\neinsora:x:1000:\n' >"$root/etc/group"
  echo /bin/sh >"$root/etc/shells"
  echo einsora-vm >"$root/etc/hostname"
  mkdir -p "$disk/home/einsora" "$disk/etc"
  chown 1000:1000 "$disk/home/einsora"
  chmod 0755 "$disk/home/einsora"

  cat >"$root/etc/inittab" <<'EOF'
::sysinit:/lib/einsora/boot
::respawn:/bin/syslogd -n -O /dev/console
::respawn:/lib/einsora/ready
::respawn:/lib/einsora/ssh-channel 0
::respawn:/lib/einsora/ssh-channel 1
::respawn:/lib/einsora/ssh-channel 2
::respawn:/lib/einsora/ssh-channel 3
::respawn:/usr/sbin/dropbear -F -s -p 127.0.0.1:22 -r /disk/etc/dropbear_ed25519_host_key
::respawn:/bin/acpid -f -c /etc/acpi -l /dev/null
::shutdown:/bin/sync
::shutdown:/bin/umount -r /disk
EOF
  # busybox acpid runs ./PWRF/00000080 in its directory for the power button.
  printf '#!/bin/sh\nexec /bin/poweroff\n' >"$root/etc/acpi/PWRF/00000080"
  chmod 0755 "$root/etc/acpi/PWRF/00000080"

  cat >"$root/lib/einsora/boot" <<'EOF'
#!/bin/sh
# The guest's first step: filesystems, modules, the disk, the seed, the SSH host key.
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug
hostname -F /etc/hostname
ip link set lo up
while read -r m; do insmod "/lib/modules/$(uname -r)/$m"; done </lib/einsora/modules
# The ports by name, as udev links them (there is no udev here).
mkdir -p /dev/virtio-ports
for p in /sys/class/virtio-ports/*; do
  [ -e "$p/name" ] && ln -sf "../${p##*/}" "/dev/virtio-ports/$(cat "$p/name")"
done
wait_for() { i=0; until [ -e "$1" ]; do i=$((i + 1)); [ $i -le 100 ] || return 1; sleep 0.1; done; }
if ! wait_for /dev/vda; then
  echo "einsora: no disk at /dev/vda" >&2
elif ! mount -t ext4 /dev/vda /disk; then
  echo "einsora: /dev/vda didn't mount" >&2
fi
# The seed: this boot's token and the user's keys (only the shapes Einsora writes).
mkdir -p /run/seed
if wait_for /dev/sr0 && mount -t iso9660 -o ro /dev/sr0 /run/seed; then
  sed -n 's/^einsora-token: *//p' /run/seed/meta-data >/run/einsora-token
  home=/disk/home/einsora
  # The user's own disk: whatever they left at ~/.ssh (a link elsewhere, say) goes, so root
  # writes only a directory it made.
  rm -rf $home/.ssh
  mkdir -p $home/.ssh
  sed -n '/ssh_authorized_keys:/,$ s/^ *- "\(.*\)"$/\1/p' /run/seed/user-data \
    | sed 's/\\"/"/g; s/\\\\/\\/g' >$home/.ssh/authorized_keys
  chown -R 1000:1000 $home/.ssh
  chmod 0700 $home/.ssh
  chmod 0600 $home/.ssh/authorized_keys
  umount /run/seed
else
  echo "einsora: no NoCloud seed at /dev/sr0" >&2
fi
[ -e /disk/etc/dropbear_ed25519_host_key ] \
  || dropbearkey -t ed25519 -f /disk/etc/dropbear_ed25519_host_key >/dev/null 2>&1
echo "einsora: booted, kernel up $(cut -d" " -f1 /proc/uptime) s"
EOF
  cat >"$root/lib/einsora/ready" <<'EOF'
#!/bin/sh
# "ready <token>" on virtio-serial port org.einsora.ready, again every 2 s (the contract).
port=/dev/virtio-ports/org.einsora.ready
[ -e $port ] || exec sleep 3600 # no such port: nothing to tell
while :; do
  printf 'ready %s\n' "$(cat /run/einsora-token)" >$port
  sleep 2
done
EOF
  cat >"$root/lib/einsora/ssh-channel" <<'EOF'
#!/bin/sh
# ssh-channel N: SSH sessions on virtio-serial port org.einsora.ssh.N, one per host connection,
# as build_vm_debian's: a port's read returns EOF at once while the host isn't connected, so
# this waits on debugfs's host_connected, says a session started, joins the port to Dropbear
# on the guest's loopback (Dropbear's inetd mode needs a socket; a guest with no network
# interface has nothing else on it), then drops what the host still sends until it
# disconnects.
link=/dev/virtio-ports/org.einsora.ssh.$1
[ -e "$link" ] || exec sleep 3600
dev=$(readlink -f "$link")
state=/sys/kernel/debug/virtio-ports/${dev##*/}
connected() {
  while read -r k v; do [ "$k" != host_connected: ] || { [ "$v" = 1 ]; return; }; done <"$state"
  return 1
}
# Open for good: closing a port drops what the host has sent.
exec 4<>"$dev"
while :; do
  until connected; do sleep 0.1; done
  printf 'einsora-ssh-session\n' >&4
  nc 127.0.0.1 22 <&4 >&4
  cat <&4 >/dev/null
done
EOF
  chmod 0755 "$root"/lib/einsora/{boot,ready,ssh-channel}
}
