//go:build !unix

package settings

import "os"

// On Windows the file keeps the directory's inherited ACL; rename is
// MoveFileEx with replace, and directories cannot be fsynced.
func chown(*os.File, int, int) error { return nil }

func syncDir(string) error { return nil }

func fileOwner(os.FileInfo) (int, int) { return -1, -1 }
