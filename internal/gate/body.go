package gate

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// bodyChunk is how much of a body is read (and budgeted) at a time when the
// client did not declare its length.
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
func readBody(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration, budget *Budget) (*heldBody, *refusal) {
	h := &heldBody{budget: budget}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return h, nil
	}
	if r.ContentLength > max {
		return nil, refuseTooLarge(max)
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
	// Unknown length (chunked): grow in budgeted steps, never past max.
	for {
		if int64(len(h.data)) > max {
			h.release()
			return nil, refuseTooLarge(max)
		}
		if !budget.TryAcquire(bodyChunk) {
			h.release()
			return nil, refuseBudget()
		}
		h.held += bodyChunk
		start := len(h.data)
		h.data = append(h.data, make([]byte, bodyChunk)...)
		n, err := io.ReadFull(r.Body, h.data[start:])
		h.data = h.data[:start+n]
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			if int64(len(h.data)) > max {
				h.release()
				return nil, refuseTooLarge(max)
			}
			// Give back what the last chunk did not use.
			spare := h.held - int64(len(h.data))
			budget.Release(spare)
			h.held -= spare
			return h, nil
		}
		if err != nil {
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
