// Package desktop is the session reporter's side of owner presence: it runs
// in the owner's desktop session (`vacancyd session-reporter`), reads the
// desktop's idle time and idle inhibitors, and sends them to the service as
// report_presence requests over the admin channel, whose kernel-verified
// uid tells the service whose session it is.
//
// The idle source is picked at run time, the first that answers of: GNOME
// Mutter's IdleMonitor, org.freedesktop.ScreenSaver, X11's MIT-SCREEN-SAVER,
// and logind's IdleHint (Linux); GetLastInputInfo (Windows); HIDIdleTime
// (macOS). Idle inhibitors held by the session's programs (a video call, a
// film) are reported as presence.
package desktop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Defaults for Reporter's zero fields.
const (
	DefaultInterval = 5 * time.Second
	// maxSample is the longest gap between two readings of the idle time;
	// a return from idleness is sent as soon as a reading sees it.
	maxSample = time.Second
	// tolerance is how far a reading may fall behind the idle time last
	// sent before it counts as new input.
	tolerance = time.Second
	// failLimit is how many readings in a row may fail before the source
	// is given up and the sources are probed again.
	failLimit  = 3
	maxBackoff = 30 * time.Second
	callLimit  = 5 * time.Second
	// maxIdle caps an idle time so that sums of it do not overflow.
	maxIdle = 100 * 365 * 24 * time.Hour
)

// IdleSource reads how long the session's user has given no input.
type IdleSource interface {
	// Name is the report's source ("mutter", "x11", ...).
	Name() string
	// Idle returns the time since the user's last input.
	Idle(ctx context.Context) (time.Duration, error)
	// Close releases the source's connection.
	Close() error
}

// Notifier is an IdleSource whose desktop signals the user's return; the
// channel receives a value when it does, and the reporter reads at once.
type Notifier interface {
	Activity() <-chan struct{}
}

// Candidate is an idle source that may work in this session.
type Candidate struct {
	Name string
	// Open connects to the source; Select then tries one reading.
	Open func(ctx context.Context) (IdleSource, error)
}

// InhibitChecker tells whether the session holds an idle inhibitor.
type InhibitChecker interface {
	Name() string
	// Inhibited reports whether an inhibitor is held now. An error means
	// this checker cannot tell (its service is absent, say).
	Inhibited(ctx context.Context) (bool, error)
}

// Report is one report_presence.
type Report struct {
	Source    string
	Idle      time.Duration
	Inhibited bool
}

// Sender delivers reports to the service.
type Sender interface {
	Send(ctx context.Context, r Report) error
}

// Select opens the candidates in order and returns the first that gives a
// reading. The error lists why each failed.
func Select(ctx context.Context, cands []Candidate) (IdleSource, error) {
	if len(cands) == 0 {
		return nil, errors.New("no idle source is built for this system")
	}
	var why []string
	for _, c := range cands {
		src, err := c.Open(ctx)
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, callLimit)
			_, err = src.Idle(cctx)
			cancel()
			if err != nil {
				src.Close()
			}
		}
		if err == nil {
			return src, nil
		}
		why = append(why, c.Name+": "+err.Error())
	}
	return nil, fmt.Errorf("no idle source answers: %s", strings.Join(why, "; "))
}

// planner decides when a reading is sent. A report goes out at once for the
// first reading, when inhibition changes, and when a reading shows input
// the service has not heard of while it believes the owner has been idle
// for an interval (at most DefaultInterval) or more: that is what ends
// lending. Otherwise a report goes out once per interval.
type planner struct {
	interval      time.Duration
	sent          bool
	sentAt        time.Time
	sentIdle      time.Duration
	sentInhibited bool
}

// due reports whether a reading taken at now should be sent now, and why.
func (p *planner) due(now time.Time, idle time.Duration, inhibited bool) (bool, string) {
	if !p.sent {
		return true, "first reading"
	}
	if inhibited != p.sentInhibited {
		return true, "inhibition changed"
	}
	elapsed := now.Sub(p.sentAt)
	if elapsed >= p.interval || elapsed < 0 {
		return true, "interval"
	}
	// The service's view matters once it shows the owner idle for a few
	// seconds; before that, reporting every key would gain nothing.
	if believed := p.sentIdle + elapsed; believed >= min(p.interval, DefaultInterval) && idle+tolerance < believed {
		return true, "input after idleness"
	}
	return false, ""
}

func (p *planner) record(now time.Time, idle time.Duration, inhibited bool) {
	p.sent, p.sentAt, p.sentIdle, p.sentInhibited = true, now, idle, inhibited
}

// backoff is the wait after n failures in a row: 1 s doubling to 30 s.
func backoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// Reporter reads the session's idle time and sends it to the service until
// its context ends. It never gives up: a missing service or idle source is
// retried with backoff.
type Reporter struct {
	// Candidates are the idle sources to try, in order of preference.
	Candidates []Candidate
	// Inhibitors are asked once per interval; any that says so makes the
	// report inhibited. Those that are io.Closers are closed by Run.
	Inhibitors []InhibitChecker
	Sender     Sender
	// Interval is the longest gap between two reports; DefaultInterval when
	// zero. The service's presence.session_timeout must be longer.
	Interval time.Duration
	// Log receives the reporter's progress; nil logs nothing.
	Log *slog.Logger

	// sample replaces the gap between readings (tests).
	sample time.Duration
}

// Run reports until ctx ends and returns nil then.
func (r *Reporter) Run(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	sample := min(interval, maxSample)
	if r.sample > 0 {
		sample = r.sample
	}
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "session-reporter")
	defer func() {
		for _, c := range r.Inhibitors {
			if cl, ok := c.(io.Closer); ok {
				cl.Close()
			}
		}
	}()

	var (
		src         IdleSource
		activity    <-chan struct{}
		readFails   int
		probeAt     time.Time
		probeErr    string
		inhibitAt   time.Time
		inhibited   bool
		inhibitErrs = map[string]string{}
		sendFails   int
		sendAt      time.Time
		plan        = planner{interval: interval}
		wait        = time.NewTimer(0)
	)
	defer wait.Stop()
	defer func() {
		if src != nil {
			src.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wait.C:
		case <-activity:
			log.Debug("the desktop signalled input")
		}
		now := time.Now()
		if src == nil && !now.Before(probeAt) {
			s, err := Select(ctx, r.Candidates)
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				if err.Error() != probeErr {
					log.Warn("no idle source; retrying", "err", err, "every", interval)
					probeErr = err.Error()
				}
				probeAt = now.Add(interval)
			} else {
				src, readFails, probeErr = s, 0, ""
				activity = nil
				if n, ok := s.(Notifier); ok {
					activity = n.Activity()
				}
				log.Info("reading idle time", "source", s.Name())
			}
		}
		if src != nil {
			cctx, cancel := context.WithTimeout(ctx, callLimit)
			idle, err := src.Idle(cctx)
			cancel()
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				readFails++
				log.Debug("idle time not read", "source", src.Name(), "err", err, "failures", readFails)
				if readFails >= failLimit {
					log.Warn("idle source failing; choosing again", "source", src.Name(), "err", err)
					src.Close()
					src, activity, probeAt = nil, nil, now
				}
			default:
				readFails = 0
				if !now.Before(inhibitAt) {
					held := r.inhibited(ctx, log, inhibitErrs)
					if held != inhibited {
						log.Info("idle inhibition", "inhibited", held)
					}
					inhibited, inhibitAt = held, now.Add(interval)
				}
				if due, why := plan.due(now, idle, inhibited); due && !now.Before(sendAt) {
					rep := Report{Source: src.Name(), Idle: idle, Inhibited: inhibited}
					if err := r.Sender.Send(ctx, rep); err != nil {
						if ctx.Err() != nil {
							return nil
						}
						sendFails++
						sendAt = now.Add(backoff(sendFails))
						if sendFails == 1 {
							log.Warn("cannot report to the service; retrying with backoff", "err", err)
						} else {
							log.Debug("report not delivered", "err", err, "failures", sendFails, "retry_in", backoff(sendFails))
						}
					} else {
						if sendFails > 0 {
							log.Info("reporting to the service again", "after_failures", sendFails)
						}
						sendFails, sendAt = 0, time.Time{}
						plan.record(now, idle, inhibited)
						log.Debug("reported", "source", rep.Source, "idle", idle, "inhibited", inhibited, "why", why)
					}
				}
			}
		}
		wait.Reset(sample)
	}
}

// inhibited asks every checker; errors are logged when they change.
func (r *Reporter) inhibited(ctx context.Context, log *slog.Logger, errs map[string]string) bool {
	held := false
	for _, c := range r.Inhibitors {
		cctx, cancel := context.WithTimeout(ctx, callLimit)
		on, err := c.Inhibited(cctx)
		cancel()
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if errs[c.Name()] != msg {
			if msg != "" {
				log.Debug("inhibitor check unavailable", "checker", c.Name(), "err", msg)
			} else {
				log.Debug("inhibitor check available", "checker", c.Name())
			}
			errs[c.Name()] = msg
		}
		if err == nil && on {
			held = true
		}
	}
	return held
}
