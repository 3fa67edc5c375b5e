//go:build unix

package settings

import (
	"fmt"
	"os"
	"syscall"
)

func fileOwner(fi os.FileInfo) (uid, gid int) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid), int(st.Gid)
	}
	return -1, -1
}

func chown(f *os.File, uid, gid int) error {
	if os.Geteuid() != 0 {
		// Only root may give a file away; an unprivileged service owns
		// what it writes, as it owned the file it replaces.
		return nil
	}
	return f.Chown(uid, gid)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("save settings: sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("save settings: sync directory: %w", err)
	}
	return nil
}
