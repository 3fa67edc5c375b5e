// Package syncbuf is a byte buffer safe for concurrent writers and readers:
// the sink tests give loggers and child processes while they read it.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects writes; its zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Mark is a position in the buffer; Since returns what came after it.
type Mark int

// Mark returns the current end of the buffer.
func (b *Buffer) Mark() Mark {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Mark(b.buf.Len())
}

// Since returns what was written after m.
func (b *Buffer) Since(m Mark) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	data := b.buf.Bytes()
	if int(m) > len(data) {
		return ""
	}
	return string(data[m:])
}
