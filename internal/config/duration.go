package config

import (
	"fmt"
	"time"
)

// Duration is a TOML string such as "5m" or "1h30m". Decoding never fails on a
// malformed value: Validate reports it at its key along with every other problem.
type Duration struct {
	time.Duration
	text string
	err  error
}

// D returns a Duration of d, as if written in the file.
func D(d time.Duration) Duration { return Duration{Duration: d, text: d.String()} }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	d.text = string(b)
	d.Duration, d.err = time.ParseDuration(d.text)
	if d.err != nil {
		d.err = fmt.Errorf("invalid duration %q (use a number with a unit, e.g. \"90s\", \"5m\", \"1h\")", d.text)
	}
	return nil
}

// MarshalText implements encoding.TextMarshaler; it writes the canonical form.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}

// String returns the duration as written in the file.
func (d Duration) String() string {
	if d.text != "" {
		return d.text
	}
	return d.Duration.String()
}
