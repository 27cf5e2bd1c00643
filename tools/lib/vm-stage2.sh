# shellcheck shell=bash
# tools/lib/vm-stage2.sh — PID 1 of the guest that tools/vm boots, once the
# initramfs has switched to the host's root (read-only 9p under a tmpfs
# overlay). Sets up what a script expects of a machine, runs the command in
# /run/vm/cmd, leaves its exit status in /run/vm/rc and powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
exec </dev/console >/dev/console 2>&1

# The guest's /tmp is its own; the host's stays reachable at /.host-tmp so
# that a checkout under /tmp (a fresh clone often goes there) can be put
# back in place below, once the run directory says where the command runs.
mkdir -p /.host-tmp && mount --bind /tmp /.host-tmp
mount -t tmpfs -o mode=1777 tmp /tmp
mount -t tmpfs -o mode=755 run /run
mkdir -p /run/vm /dev/pts /dev/shm /run/lock /run/rpcbind /var/lib/nfs/rpc_pipefs
mount -t devpts -o gid=5,mode=620 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
# devtmpfs has no /dev/fd (bash's process substitution needs it).
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin
ln -sf /proc/self/fd/1 /dev/stdout
ln -sf /proc/self/fd/2 /dev/stderr
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 vmrun /run/vm ||
	{ echo "vm: cannot mount the run directory"; echo o >/proc/sysrq-trigger; }
# A command that runs under the host's /tmp: its top directory there is
# bound into the guest's /tmp at the same path.
cwd=$(cat /run/vm/cwd 2>/dev/null)
case $cwd in
/tmp/?*)
	top=${cwd#/tmp/}
	top=${top%%/*}
	mkdir -p "/tmp/$top" && mount --bind "/.host-tmp/$top" "/tmp/$top" ||
		echo "vm: cannot bind the host's /tmp/$top into the guest"
	;;
esac
# The host's other mounts (FUSE, tmpfs, ...) show through the 9p root as
# directories; whatever the guest mounts itself goes on top.
ver=$(uname -r)
kmods=$(cat /run/vm/vmdir 2>/dev/null)/linux/lib/modules/$ver
if [ -d "$kmods" ]; then
	mkdir -p "/lib/modules/$ver"
	mount --bind "$kmods" "/lib/modules/$ver"
fi
echo 1 >/proc/sys/kernel/sysrq
hostname cachegw-vm 2>/dev/null
ip link set lo up
# getaddrinfo(AI_ADDRCONFIG), used by ganesha and the NFS tools, finds no
# IPv4 address on a machine that has only loopback: give the guest one on
# a dummy interface (no traffic leaves the guest: it has no NIC).
modprobe dummy 2>/dev/null && ip link add vm0 type dummy &&
	ip addr add 10.213.0.1/24 dev vm0 && ip link set vm0 up
modprobe fuse 2>/dev/null
[ -e /dev/fuse ] || mknod -m 666 /dev/fuse c 10 229
# The host's machine-id and hostname files are read-only here; that is fine.

rc=125
if [ -r /run/vm/cmd ]; then
	bash /run/vm/cmd
	rc=$?
fi
echo "$rc" >/run/vm/rc
sync
echo o >/proc/sysrq-trigger
sleep 10
