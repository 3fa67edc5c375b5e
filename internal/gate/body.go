package gate

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// bodyChunk is the first buffer (and budget) given to a body whose length
// the client did not declare.
const bodyChunk = 32 << 10

// heldBody is a request body read into memory under the limits, and the
// budget it holds until released.
type heldBody struct {
	data   []byte
	budget *Budget
	held   int64
}

func (h *heldBody) release() {
	if h.held > 0 {
		h.budget.Release(h.held)
		h.held = 0
	}
}

// readBody reads r's body within the size cap, the time allowed, and the
// global budget. It returns the outcome and status of a refusal, if any.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration, budget *Budget) (*heldBody, *refusal) {
	h := &heldBody{budget: budget}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return h, nil
	}
	if r.ContentLength > limit {
		return nil, refuseTooLarge(limit)
	}
	rc := http.NewResponseController(w)
	if timeout > 0 {
		// Not every ResponseWriter supports deadlines (tests' recorders);
		// a real connection does.
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	if r.ContentLength > 0 {
		if !budget.TryAcquire(r.ContentLength) {
			return nil, refuseBudget()
		}
		h.held = r.ContentLength
		h.data = make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, h.data); err != nil {
			h.release()
			return nil, readFailure(err)
		}
		return h, nil
	}
	// Unknown length (chunked): the buffer doubles as the body arrives, up
	// to the cap, and each size is budgeted in full before it is allocated,
	// so the budget covers the buffer's whole capacity (the buffers it
	// outgrew are garbage of at most that size again). A full buffer grows
	// only once another byte has arrived: a body that fills it exactly is
	// not charged twice its size, and a byte past the cap shows a body too
	// large.
	for {
		if len(h.data) == cap(h.data) {
			var next [1]byte
			_, err := io.ReadFull(r.Body, next[:])
			switch {
			case errors.Is(err, io.EOF):
				return h, nil
			case err != nil:
				h.release()
				return nil, readFailure(err)
			case int64(len(h.data)) >= limit:
				h.release()
				return nil, refuseTooLarge(limit)
			}
			size := min(max(2*int64(cap(h.data)), bodyChunk), limit)
			if !budget.TryAcquire(size - h.held) {
				h.release()
				return nil, refuseBudget()
			}
			h.held = size
			grown := make([]byte, len(h.data), size)
			copy(grown, h.data)
			h.data = append(grown, next[0])
			continue
		}
		n, err := r.Body.Read(h.data[len(h.data):cap(h.data)])
		h.data = h.data[:len(h.data)+n]
		switch {
		case errors.Is(err, io.EOF):
			return h, nil
		case err != nil:
			h.release()
			return nil, readFailure(err)
		}
	}
}

func readFailure(err error) *refusal {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &refusal{status: http.StatusRequestTimeout, outcome: OutcomeBodyTimeout, errType: "refused_body_timeout",
			msg: "the request body was not sent in time", closeConn: true}
	case errors.As(err, &mbe):
		return refuseTooLarge(mbe.Limit)
	}
	return &refusal{status: http.StatusBadRequest, outcome: OutcomeRequest, errType: "refused_request",
		msg: "the request body could not be read", closeConn: true}
}

func refuseTooLarge(max int64) *refusal {
	return &refusal{status: http.StatusRequestEntityTooLarge, outcome: OutcomeBodyTooLarge, errType: "refused_body_too_large",
		msg: "the request body is larger than this gate accepts (" + formatBytes(max) + ")", closeConn: true}
}

func refuseBudget() *refusal {
	return &refusal{status: http.StatusServiceUnavailable, outcome: OutcomeBodyBudget, errType: "refused_body_budget",
		msg: "the gate is holding too much request data right now; retry shortly", retryAfter: time.Second, closeConn: true}
}
