package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

func TestConcurrentWritesAndMarks(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := len(b.String()); got != 800 {
		t.Fatalf("%d bytes, want 800", got)
	}
	m := b.Mark()
	_, _ = b.Write([]byte("after"))
	if got := b.Since(m); got != "after" || !strings.HasSuffix(b.String(), "after") {
		t.Fatalf("Since = %q", got)
	}
	if b.Since(Mark(1<<20)) != "" {
		t.Fatal("a mark past the end returned text")
	}
}
