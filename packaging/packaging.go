// Package packaging holds the files vacancyd ships for installation, embedded
// so that check-config can judge the packaged systemd unit before it is installed.
package packaging

import _ "embed"

// SystemdUnit is the packaged systemd service unit.
//
//go:embed systemd/vacancyd.service
var SystemdUnit []byte
