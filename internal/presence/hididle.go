package presence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// ParseHIDIdleTime reads the HID system's idle time from the output of
// `ioreg -c IOHIDSystem` (macOS): the first `"HIDIdleTime" = <nanoseconds>`.
func ParseHIDIdleTime(out []byte) (time.Duration, error) {
	key := []byte(`"HIDIdleTime"`)
	i := bytes.Index(out, key)
	if i < 0 {
		return 0, errors.New("no HIDIdleTime in the ioreg output")
	}
	rest := bytes.TrimLeft(out[i+len(key):], " \t")
	if len(rest) == 0 || rest[0] != '=' {
		return 0, errors.New("HIDIdleTime has no value")
	}
	rest = bytes.TrimLeft(rest[1:], " \t")
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, errors.New("HIDIdleTime is not a number")
	}
	ns, err := strconv.ParseUint(string(rest[:end]), 10, 64)
	if err != nil || ns > uint64(maxIdle) {
		return maxIdle, nil // a number too large to be real: idle for ever
	}
	return time.Duration(ns), nil
}

// ioregCommand reads the HID system's properties.
func ioregCommand(ctx context.Context) ([]byte, error) {
	return exec.CommandContext(ctx, "ioreg", "-c", "IOHIDSystem", "-d", "4").Output()
}

// HIDIdle is macOS's service-side presence source: the HID system's idle
// time (HIDIdleTime, which counts every keyboard, mouse and trackpad),
// read with ioreg every Interval and reported as Activity{LastInput: now -
// idle} whenever the last input moved. Where ioreg is missing or says
// nothing (any system but macOS) the source is not ready.
type HIDIdle struct {
	// Interval is how often the idle time is read; DefaultHIDIdleEvery when
	// zero.
	Interval time.Duration
	// Read returns ioreg's output; nil runs `ioreg -c IOHIDSystem -d 4`.
	Read func(ctx context.Context) ([]byte, error)
	// Log receives readiness changes; nil logs nothing.
	Log *slog.Logger
}

// Run reads until ctx ends and returns nil then.
func (h *HIDIdle) Run(ctx context.Context, sink lending.Sink) error {
	every := h.Interval
	if every <= 0 {
		every = DefaultHIDIdleEvery
	}
	read := h.Read
	if read == nil {
		read = ioregCommand
	}
	log := orDiscard(h.Log).With("component", "presence", "source", SourceHIDIdle)
	var (
		ready      *bool
		reason     string
		lastReport time.Time
	)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := read(rctx)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		var idle time.Duration
		if err == nil {
			idle, err = ParseHIDIdleTime(out)
		}
		now := time.Now()
		if err != nil {
			why := fmt.Sprintf("cannot read HIDIdleTime (macOS only): %v", err)
			if ready == nil || *ready || why != reason {
				log.Warn("HID idle time unavailable", "err", err)
				sink.SetReady(SourceHIDIdle, false, why)
				ready, reason = ptrTo(false), why
			}
		} else {
			if ready == nil || !*ready {
				sink.SetReady(SourceHIDIdle, true, "")
				ready, reason = ptrTo(true), ""
				lastReport = time.Time{}
			}
			last := now.Add(-idle)
			// Consecutive reads of an idle system give the same last input
			// give or take the time the read took; a jump means input.
			if lastReport.IsZero() || last.Sub(lastReport) > every/2 {
				sink.ReportActivity(SourceHIDIdle, lending.Activity{LastInput: last})
				lastReport = last
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
