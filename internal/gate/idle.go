package gate

import (
	"net/http"
	"time"
)

// idleWriter cuts the connection when the client leaves a response unread:
// before each write it moves the connection's write deadline to now plus the
// idle limit, so a write that cannot drain into a client that stopped reading
// fails, the proxy stops, and the upstream request is cancelled.
type idleWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func newIdleWriter(w http.ResponseWriter, idle time.Duration) http.ResponseWriter {
	if idle <= 0 {
		return w
	}
	return &idleWriter{ResponseWriter: w, rc: http.NewResponseController(w), idle: idle}
}

func (w *idleWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	return w.ResponseWriter.Write(p)
}

func (w *idleWriter) WriteHeader(code int) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	w.ResponseWriter.WriteHeader(code)
}

// Flush sends buffered data; the deadline set by the write covers it.
func (w *idleWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection (flush, hijack
// for WebSocket upgrades, deadlines).
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
