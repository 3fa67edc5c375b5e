package presence

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/vacancyd/vacancyd/internal/lending"
)

// MaxSessionSources bounds the sources one account may report under: a
// reporter names its own source, so without a bound one account could fill
// /status with names. A new source past the bound replaces the account's
// longest-silent one.
const MaxSessionSources = 8

// maxIdle caps a reported idle time so that it converts to a Duration.
const maxIdle = 100 * 365 * 24 * time.Hour

// Sessions turns the session reporters' report_presence requests into
// activity reports. It is the admin channel's admin.PresenceSink: the
// account is the one the channel verified (the kernel's uid for the socket),
// never one the message names.
//
// A report becomes ReportActivity("session:"+account+"/"+source,
// Activity{LastInput: now - idle, Inhibited: inhibited, Until: now +
// timeout}); a reporter that goes quiet therefore expires after the session
// timeout, and Run forgets it altogether once it has been silent for ten
// timeouts (at least five minutes).
type Sessions struct {
	sink lending.Sink
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	timeout time.Duration
	// seen maps account to source name to the time of its last report.
	seen map[string]map[string]time.Time
}

// NewSessions returns Sessions reporting to sink. timeout is
// presence.session_timeout (DefaultSessionTimeout when not positive).
func NewSessions(sink lending.Sink, timeout time.Duration, log *slog.Logger) *Sessions {
	s := &Sessions{sink: sink, log: orDiscard(log).With("component", "presence", "source", "session"), now: time.Now, seen: map[string]map[string]time.Time{}}
	s.SetTimeout(timeout)
	return s
}

// SetTimeout changes the session timeout for the reports that follow (a
// settings reload).
func (s *Sessions) SetTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultSessionTimeout
	}
	s.mu.Lock()
	s.timeout = d
	s.mu.Unlock()
}

// SessionSource is the sink's source name for an account's reporter source.
func SessionSource(account, source string) string {
	return SessionSourcePrefix + account + "/" + source
}

// ReportPresence is Report; it makes Sessions an admin.PresenceSink.
func (s *Sessions) ReportPresence(account string, idleSeconds float64, source string, inhibited bool) {
	s.Report(account, idleSeconds, source, inhibited)
}

// Report records one report_presence from account. idleSeconds is how long
// the desktop has seen no input; inhibited says an idle inhibitor is held.
func (s *Sessions) Report(account string, idleSeconds float64, source string, inhibited bool) {
	now := s.now()
	idle := time.Duration(0)
	switch {
	case math.IsNaN(idleSeconds) || idleSeconds <= 0:
	case idleSeconds >= maxIdle.Seconds():
		idle = maxIdle
	default:
		idle = time.Duration(idleSeconds * float64(time.Second))
	}
	name := SessionSource(account, source)

	s.mu.Lock()
	timeout := s.timeout
	sources := s.seen[account]
	if sources == nil {
		sources = map[string]time.Time{}
		s.seen[account] = sources
	}
	_, known := sources[source]
	var evict string
	if !known && len(sources) >= MaxSessionSources {
		var oldest time.Time
		for src, at := range sources {
			if evict == "" || at.Before(oldest) {
				evict, oldest = src, at
			}
		}
		delete(sources, evict)
	}
	sources[source] = now
	// The sink is called under the lock so that two reports from one
	// source reach it in the order they were stamped.
	defer s.mu.Unlock()
	if evict != "" {
		s.log.Warn("too many presence sources for one account; forgetting the longest silent", "account", account, "forgotten", evict, "new", source)
		s.sink.Forget(SessionSource(account, evict))
	}
	if !known {
		s.log.Info("session reporter started reporting", "account", account, "reporter_source", source)
		s.sink.SetReady(name, true, "")
	}
	s.sink.ReportActivity(name, lending.Activity{LastInput: now.Add(-idle), Inhibited: inhibited, Until: now.Add(timeout)})
}

// Run forgets reporters that have been silent for ten session timeouts (at
// least five minutes), until ctx ends; it returns nil then.
func (s *Sessions) Run(ctx context.Context) error {
	for {
		s.mu.Lock()
		every := s.timeout
		s.mu.Unlock()
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		s.forgetSilent(s.now())
	}
}

func (s *Sessions) forgetSilent(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	after := max(10*s.timeout, 5*time.Minute)
	var gone []string
	for account, sources := range s.seen {
		for src, at := range sources {
			if now.Sub(at) > after {
				gone = append(gone, SessionSource(account, src))
				delete(sources, src)
			}
		}
		if len(sources) == 0 {
			delete(s.seen, account)
		}
	}
	for _, name := range gone {
		s.log.Info("session reporter silent; forgetting it", "source", name)
		s.sink.Forget(name)
	}
}
