package gate

import "sync"

// Budget is the global allowance of request-body bytes held in memory across
// all gates at once ([server.limits] body_budget_bytes). A request that would
// take the total beyond it is refused (503 refused_body_budget) rather than
// queued, so memory stays bounded whatever clients send.
type Budget struct {
	mu   sync.Mutex
	used int64
	max  int64
}

// NewBudget returns a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// TryAcquire takes n bytes if they fit and reports whether it did.
func (b *Budget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < 0 || b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// Release returns n bytes.
func (b *Budget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.used < 0 {
		panic("gate: body budget released more than it acquired")
	}
}

// Used returns the bytes held now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
