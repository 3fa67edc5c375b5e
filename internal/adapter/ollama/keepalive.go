package ollama

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// keepAlive is a parsed keep_alive value, read exactly as Ollama's
// api.Duration.UnmarshalJSON reads it (ollama api/types.go): a JSON number
// is whole seconds (the fraction is dropped, so 0.5 means 0) and a negative
// number means forever; a JSON string is a Go duration ("5m", "0", "1h30m")
// and a negative one means forever; any other JSON type is an error. A JSON
// null never reaches here: it leaves the field unset, like an absent key.
type keepAlive struct {
	forever bool
	number  bool
	seconds float64       // whole seconds of a non-negative number
	dur     time.Duration // a non-negative duration string
}

// parseKeepAlive parses one raw JSON value (not null).
func parseKeepAlive(raw json.RawMessage) (keepAlive, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return keepAlive{}, err
	}
	switch t := v.(type) {
	case float64:
		if t < 0 {
			return keepAlive{forever: true, number: true}, nil
		}
		return keepAlive{number: true, seconds: math.Trunc(t)}, nil
	case string:
		d, err := time.ParseDuration(t)
		if err != nil {
			return keepAlive{}, fmt.Errorf("keep_alive: %w", err)
		}
		if d < 0 {
			return keepAlive{forever: true}, nil
		}
		return keepAlive{dur: d}, nil
	}
	return keepAlive{}, fmt.Errorf("keep_alive: unsupported type %T", v)
}

// zero reports whether Ollama sees a keep_alive of 0: unload once idle.
func (k keepAlive) zero() bool {
	if k.forever {
		return false
	}
	if k.number {
		return k.seconds == 0
	}
	return k.dur == 0
}

// exceeds reports whether the value asks to keep a model longer than limit
// (forever always does). Large numbers are compared as floats, so values
// that would overflow Ollama's int arithmetic count as exceeding.
func (k keepAlive) exceeds(limit time.Duration) bool {
	switch {
	case k.forever:
		return true
	case k.number:
		return k.seconds > limit.Seconds()
	}
	return k.dur > limit
}

// capValue is the JSON that replaces a keep_alive over the cap: a Go
// duration string, which keeps sub-second caps exact.
func capValue(limit time.Duration) json.RawMessage {
	b, _ := json.Marshal(limit.String())
	return b
}
