package cli

import (
	"fmt"
	"io"
	"log/slog"
)

var levels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// newLogger returns the logger the global flags ask for, writing to w, and
// the level variable behind it (the daemon's debug window changes it).
func newLogger(w io.Writer, level, format string) (*slog.Logger, *slog.LevelVar, error) {
	lv, ok := levels[level]
	if !ok {
		return nil, nil, fmt.Errorf("invalid --log-level %q: use debug, info, warn or error", level)
	}
	v := new(slog.LevelVar)
	v.Set(lv)
	opts := &slog.HandlerOptions{Level: v}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), v, nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), v, nil
	default:
		return nil, nil, fmt.Errorf("invalid --log-format %q: use text or json", format)
	}
}
