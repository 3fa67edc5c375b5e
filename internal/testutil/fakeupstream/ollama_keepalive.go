package fakeupstream

// keep_alive and the loaded-model table: parsing keep_alive the way
// api.Duration does, and loading, expiring and unloading models the way
// Ollama's scheduler does.

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"reflect"
	"time"
)

// keepAlive is a parsed keep_alive (api.Duration semantics).
type keepAlive struct {
	set     bool
	d       time.Duration
	forever bool
}

// parseKeepAlive follows api.Duration.UnmarshalJSON: a number is seconds,
// a string is a Go duration, a negative value is forever.
func parseKeepAlive(raw json.RawMessage) (keepAlive, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return keepAlive{}, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return keepAlive{}, err
	}
	ka := keepAlive{set: true}
	switch t := v.(type) {
	case float64:
		if t < 0 {
			ka.forever = true
		} else {
			ka.d = time.Duration(t * float64(time.Second))
		}
	case string:
		d, err := time.ParseDuration(t)
		if err != nil {
			return keepAlive{}, err
		}
		if d < 0 {
			ka.forever = true
		} else {
			ka.d = d
		}
	default:
		//lint:ignore ST1005 api.Duration's own message, verbatim
		return keepAlive{}, fmt.Errorf("Unsupported type: '%s'", reflect.TypeOf(v))
	}
	return ka, nil
}

func (o *Ollama) session(ka keepAlive) keepAlive {
	if !ka.set {
		return keepAlive{set: true, d: o.cfg.keepAlive}
	}
	return ka
}

func expiry(now time.Time, ka keepAlive) time.Time {
	if ka.forever {
		// time.Time.Add saturates, as in Ollama's scheduler.
		return now.Add(time.Duration(math.MaxInt64))
	}
	return now.Add(ka.d)
}

// acquire loads name for a request (Ollama's scheduler: the request's
// keep_alive, or the default, becomes the model's session duration).
func (o *Ollama) acquire(name string, ka keepAlive) {
	ka = o.session(ka)
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.loaded[name]
	if l == nil {
		l = &loadedModel{name: name}
		o.loaded[name] = l
	}
	l.refs++
	l.keep, l.forever = ka.d, ka.forever
	l.expires = expiry(time.Now(), ka)
}

// release ends a request's use of name: with no request left, a session
// of 0 unloads the model and any other restarts its expiry timer.
func (o *Ollama) release(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.loaded[name]
	if l == nil {
		return
	}
	if l.refs > 0 {
		l.refs--
	}
	if l.refs > 0 {
		return
	}
	if !l.forever && l.keep <= 0 {
		delete(o.loaded, name)
		return
	}
	l.expires = expiry(time.Now(), keepAlive{d: l.keep, forever: l.forever})
}

// unload is expireRunner: the model goes at once when idle.
func (o *Ollama) unload(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.loaded[name]
	if l == nil {
		return
	}
	if l.refs == 0 {
		delete(o.loaded, name)
		return
	}
	l.keep, l.forever, l.expires = 0, false, time.Now()
}

func (o *Ollama) expireLocked() {
	now := time.Now()
	for n, l := range o.loaded {
		if l.refs == 0 && !l.forever && !l.expires.After(now) {
			delete(o.loaded, n)
		}
	}
}

// keepAliveOf reads a request's keep_alive, answering Ollama's 400 when it
// is malformed; ok is false when an answer was written.
func keepAliveOf(w http.ResponseWriter, raw json.RawMessage) (keepAlive, bool) {
	ka, err := parseKeepAlive(raw)
	if err != nil {
		ollamaError(w, http.StatusBadRequest, err.Error())
		return keepAlive{}, false
	}
	return ka, true
}

// knownModel finds a model, answering Ollama's 404 when there is none; ok
// is false when an answer was written.
func (o *Ollama) knownModel(w http.ResponseWriter, name string) (*ollamaModel, bool) {
	m, ok := o.model(name)
	if !ok {
		ollamaError(w, http.StatusNotFound, fmt.Sprintf("model '%s' not found", name))
	}
	return m, ok
}
