# gluster_lib.sh - a GlusterFS volume on one machine, for tests and
# benchmarks (sourced): two servers, each glusterd in a network namespace and
# a mount namespace of its own (its state, sockets and logs under $GT), with
# private addresses 10.211.0.1 and .2 on a bridge in a third namespace, where
# the clients run (10.211.0.3). GlusterFS refuses loopback addresses, hence
# the namespaces; nothing here talks to any other address.
#
#   gluster_skip_reason            why it cannot run here (empty: it can)
#   gluster_up DIR [replica|distribute]   servers and volume zrvol, files in DIR
#   gluster_client MNT SERVER      a client mount of zrvol (SERVER 1 or 2)
#   gluster_kill_server N          kill server N's processes (glusterd, brick)
#   gluster_down                   unmount the clients, stop everything, remove DIR
# Failures call `fail` (the caller's).

gluster_skip_reason() {
	[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces, mounts)"; return; }
	command -v glusterd >/dev/null && command -v mount.glusterfs >/dev/null || {
		echo "GlusterFS is not installed (packaging/deps.sh installs glusterfs-server and -client)"
		return
	}
	ip netns add "zrg$$probe" 2>/dev/null || { echo "cannot make a network namespace here"; return; }
	ip netns del "zrg$$probe"
}

gluster_up() {
	GT=$1
	gid=$(($$ % 10000))
	GNC=zrg${gid}c GNS1=zrg${gid}s1 GNS2=zrg${gid}s2
	mkdir -p "$GT"
	ip netns add "$GNC" && ip netns add "$GNS1" && ip netns add "$GNS2" || fail "namespaces"
	ip -n "$GNC" link set lo up
	ip -n "$GNC" link add br0 type bridge && ip -n "$GNC" link set br0 up &&
		ip -n "$GNC" addr add 10.211.0.3/24 dev br0 || fail "the bridge"
	for i in 1 2; do
		ns=$(eval echo "\$GNS$i")
		ip link add "zrg${gid}v$i" type veth peer name "zrg${gid}p$i" || fail "veth $i"
		ip link set "zrg${gid}v$i" netns "$ns" && ip link set "zrg${gid}p$i" netns "$GNC" ||
			fail "veth $i"
		ip -n "$ns" link set "zrg${gid}v$i" name eth0 && ip -n "$ns" link set lo up &&
			ip -n "$ns" addr add "10.211.0.$i/24" dev eth0 && ip -n "$ns" link set eth0 up ||
			fail "server $i's address"
		ip -n "$GNC" link set "zrg${gid}p$i" master br0 &&
			ip -n "$GNC" link set "zrg${gid}p$i" up || fail "port $i"
		mkdir -p "$GT/s$i/lib" "$GT/s$i/log" "$GT/s$i/brick"
		ip netns exec "$ns" unshare -m sh -c "mount --make-rprivate / &&
			mount --bind '$GT/s$i/lib' /var/lib/glusterd &&
			mount -t tmpfs zrfs-gluster /run && mkdir /run/gluster &&
			mount --bind '$GT/s$i/log' /var/log/glusterfs && exec glusterd -N" \
			>"$GT/s$i/out" 2>&1 &
		echo $! >"$GT/s$i/pid"
	done
	GP1=$(cat "$GT/s1/pid")
	timeout 60 sh -c "until nsenter --target $GP1 --mount --net gluster --mode=script \
		peer status >/dev/null 2>&1; do :; done" ||
		fail "glusterd 1 did not start: $(tail -3 "$GT/s1/out")"
	timeout 60 sh -c "until nsenter --target $GP1 --mount --net gluster --mode=script \
		peer probe 10.211.0.2 >/dev/null 2>&1; do :; done" || fail "peer probe of server 2"
	[ "${2:-replica}" = replica ] && set -- replica 2 || set --
	gluster_cli volume create zrvol "$@" "10.211.0.1:$GT/s1/brick/b" \
		"10.211.0.2:$GT/s2/brick/b" force >"$GT/vol" 2>&1 ||
		fail "volume create: $(cat "$GT/vol")"
	gluster_cli volume set zrvol network.ping-timeout 5 >/dev/null || fail "volume set"
	gluster_cli volume start zrvol >"$GT/vol" 2>&1 || fail "volume start: $(cat "$GT/vol")"
}

gluster_cli() { nsenter --target "$GP1" --mount --net gluster --mode=script "$@"; }

gluster_client() {
	GCLIENTS="${GCLIENTS:-} $1"
	mkdir -p "$1"
	timeout 60 sh -c "until nsenter --net=/run/netns/$GNC mount -t glusterfs \
		-o log-file=$1.log 10.211.0.$2:/zrvol $1 2>/dev/null; do :; done" ||
		fail "client mount of $1"
}

gluster_kill_server() { ip netns pids "$(eval echo "\$GNS$1")" | xargs -r kill -9; }

gluster_down() {
	[ -n "${GT:-}" ] || return 0
	for m in ${GCLIENTS:-}; do
		mountpoint -q "$m" 2>/dev/null && umount -l "$m"
	done
	pids=$(for n in "$GNC" "$GNS1" "$GNS2"; do ip netns pids "$n" 2>/dev/null; done)
	[ -n "$pids" ] && kill -9 $pids 2>/dev/null
	for p in $pids; do # gone before their files are removed (bounded)
		timeout 10 sh -c "while [ -e /proc/$p/stat ] &&
			[ \"\$(cut -d' ' -f3 /proc/$p/stat)\" != Z ]; do :; done"
	done
	for n in "$GNC" "$GNS1" "$GNS2"; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$GT"
}
