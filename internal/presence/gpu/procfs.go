package gpu

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procFS reads the process table under root ("/proc" outside tests).
type procFS struct{ root string }

// listenSocket is one LISTEN socket from /proc/net/tcp or tcp6.
type listenSocket struct {
	addr  netip.AddrPort
	inode uint64
}

// listeners returns the TCP sockets in LISTEN state in this network
// namespace. A missing tcp6 table (IPv6 disabled) is not an error.
func (p procFS) listeners() ([]listenSocket, error) {
	var out []listenSocket
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		b, err := os.ReadFile(filepath.Join(p.root, name))
		if err != nil {
			if name == "net/tcp6" && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("read %s: %w", name, err)
		}
		out = append(out, parseListeners(b)...)
	}
	return out, nil
}

const tcpListen = "0A" // TCP_LISTEN in /proc/net/tcp's st column

// parseListeners reads a /proc/net/tcp or tcp6 table, skipping lines it
// cannot parse.
func parseListeners(b []byte) []listenSocket {
	var out []listenSocket
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan() // header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// sl local rem st queues tr retrnsmt uid timeout inode ...
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		ap, ok := parseHexAddrPort(f[1])
		if !ok {
			continue
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || inode == 0 {
			continue
		}
		out = append(out, listenSocket{addr: ap, inode: inode})
	}
	return out
}

// parseHexAddrPort decodes "0100007F:2AF8": the address is the kernel's
// 32-bit words printed as host-order integers, the port is big-endian hex.
func parseHexAddrPort(s string) (netip.AddrPort, bool) {
	h, portHex, ok := strings.Cut(s, ":")
	if !ok || (len(h) != 8 && len(h) != 32) {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil {
		return netip.AddrPort{}, false
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}

// socketOwners maps each inode in want to the pids holding a descriptor on
// it. Processes whose descriptors cannot be read (gone, or another user's
// without the privilege) are skipped; denied counts the latter.
func (p procFS) socketOwners(want map[uint64]bool) (owners map[uint64][]int, denied int, err error) {
	owners = map[uint64][]int{}
	if len(want) == 0 {
		return owners, 0, nil
	}
	ents, err := os.ReadDir(p.root)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", p.root, err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := filepath.Join(p.root, e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				denied++
			}
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil {
				continue
			}
			inode, ok := socketInode(link)
			if ok && want[inode] {
				owners[inode] = appendUnique(owners[inode], pid)
			}
		}
	}
	return owners, denied, nil
}

// socketInode parses "socket:[12345]".
func socketInode(link string) (uint64, bool) {
	s, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, "]")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func appendUnique(s []int, v int) []int {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// ppid returns a process's parent pid from /proc/<pid>/stat.
func (p procFS) ppid(pid int) (int, error) {
	b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	return parseStatPPID(b)
}

// parseStatPPID reads the ppid from a stat line: "pid (comm) state ppid ...".
// comm may hold spaces and parentheses, so fields start after the last ')'.
func parseStatPPID(b []byte) (int, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("stat: no comm field")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, errors.New("stat: too few fields")
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, fmt.Errorf("stat: ppid: %w", err)
	}
	return n, nil
}

// maxAncestry bounds a ppid walk; process trees are far shallower.
const maxAncestry = 128

// descendsFrom reports whether pid is one of roots or a descendant of one.
// A process that is gone or unreadable does not descend from anything.
func (p procFS) descendsFrom(pid int, roots map[int]bool) bool {
	for range maxAncestry {
		if roots[pid] {
			return true
		}
		if pid <= 1 {
			return false
		}
		parent, err := p.ppid(pid)
		if err != nil || parent == pid {
			return false
		}
		pid = parent
	}
	return false
}

// comm is a process's name, or "" when it cannot be read.
func (p procFS) comm(pid int) string {
	b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
