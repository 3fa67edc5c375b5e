package gate

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestReadBodyAccounting: a body read under the limits holds exactly the
// budget it is charged (its buffer's capacity), refusals hold nothing, and
// release gives everything back. Declared and chunked sizes around the
// first buffer and the cap.
func TestReadBodyAccounting(t *testing.T) {
	const limit = 100 << 10
	for _, size := range []int{0, 1, bodyChunk - 1, bodyChunk, bodyChunk + 1, 2 * bodyChunk, limit - 1, limit, limit + 1, 3 * limit} {
		for _, chunked := range []bool{false, true} {
			b := NewBudget(1 << 30)
			body := bytes.Repeat([]byte("x"), size)
			r := httptest.NewRequest("POST", "/", io.NopCloser(bytes.NewReader(body)))
			r.ContentLength = int64(size)
			if chunked {
				r.ContentLength = -1
			}
			h, ref := readBody(httptest.NewRecorder(), r, limit, time.Minute, b)
			if size > limit {
				if ref == nil || ref.outcome != OutcomeBodyTooLarge || b.Used() != 0 {
					t.Fatalf("size %d chunked %v: refusal %+v, budget %d", size, chunked, ref, b.Used())
				}
				continue
			}
			if ref != nil {
				t.Fatalf("size %d chunked %v: refused %+v", size, chunked, ref)
			}
			if !bytes.Equal(h.data, body) {
				t.Fatalf("size %d chunked %v: read %d bytes", size, chunked, len(h.data))
			}
			if b.Used() != h.held || h.held != int64(cap(h.data)) || h.held > max(2*int64(size), bodyChunk) {
				t.Fatalf("size %d chunked %v: budget %d, held %d, capacity %d", size, chunked, b.Used(), h.held, cap(h.data))
			}
			h.release()
			h.release()
			if b.Used() != 0 {
				t.Fatalf("size %d chunked %v: %d left after release", size, chunked, b.Used())
			}
		}
	}
}

// TestReadBodyBudgetRefusal: a body that would take the budget past its
// size is refused (refused_body_budget) and holds nothing afterwards, and
// what others hold is untouched.
func TestReadBodyBudgetRefusal(t *testing.T) {
	b := NewBudget(64 << 10)
	if !b.TryAcquire(16 << 10) {
		t.Fatal("acquire")
	}
	for _, chunked := range []bool{false, true} {
		r := httptest.NewRequest("POST", "/", io.NopCloser(bytes.NewReader(make([]byte, 60<<10))))
		if chunked {
			r.ContentLength = -1
		}
		_, ref := readBody(httptest.NewRecorder(), r, 1<<20, time.Minute, b)
		if ref == nil || ref.outcome != OutcomeBodyBudget || ref.status != http.StatusServiceUnavailable || !ref.closeConn {
			t.Fatalf("chunked %v: %+v", chunked, ref)
		}
		if b.Used() != 16<<10 {
			t.Fatalf("chunked %v: budget %d after the refusal", chunked, b.Used())
		}
	}
}
