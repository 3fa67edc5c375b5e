package gate

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/vacancyd/vacancyd/internal/adapter"
)

// Outcomes of a gate request, the outcome label of vacancyd_requests_total.
const (
	OutcomeAdmitted      = "admitted"
	OutcomeNotLending    = "not_lending"
	OutcomeUpstreamError = "upstream_error"
	OutcomeAuth          = "refused_auth"
	OutcomeManagement    = "refused_management"
	OutcomeRoute         = "refused_route"
	OutcomeRequest       = "refused_request"
	OutcomeBodyTooLarge  = "refused_body_too_large"
	OutcomeBodyBudget    = "refused_body_budget"
	OutcomeBodyTimeout   = "refused_body_timeout"
	OutcomeNotOwner      = "refused_not_owner"
	OutcomeClientGone    = "client_gone"
	OutcomeReclaimed     = "reclaimed"
)

// Outcomes lists every outcome, so each shows as 0 before it happens.
var Outcomes = []string{
	OutcomeAdmitted, OutcomeNotLending, OutcomeUpstreamError, OutcomeAuth,
	OutcomeManagement, OutcomeRoute, OutcomeRequest, OutcomeBodyTooLarge,
	OutcomeBodyBudget, OutcomeBodyTimeout, OutcomeNotOwner, OutcomeClientGone, OutcomeReclaimed,
}

// Metrics are the gates' Prometheus series, shared by every gate.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
	budget   prometheus.GaugeFunc
}

// NewMetrics registers the gate metrics on reg. budget, when set, is exposed
// as vacancyd_body_budget_used_bytes.
func NewMetrics(reg prometheus.Registerer, budget *Budget) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vacancyd_requests_total",
			Help: "Borrower requests at the gates, by upstream and outcome.",
		}, []string{"upstream", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vacancyd_request_duration_seconds",
			Help:    "Time from a gate receiving a request to the end of its response, by upstream and class.",
			Buckets: []float64{.005, .025, .1, .5, 1, 2.5, 5, 10, 30, 60, 180, 600},
		}, []string{"upstream", "class"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vacancyd_requests_in_flight",
			Help: "Borrower requests being forwarded now, by upstream.",
		}, []string{"upstream"}),
	}
	cs := []prometheus.Collector{m.requests, m.duration, m.inFlight}
	if budget != nil {
		m.budget = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vacancyd_body_budget_used_bytes",
			Help: "Request-body bytes held in memory across all gates.",
		}, func() float64 { return float64(budget.Used()) })
		cs = append(cs, m.budget)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// gateSeries are one gate's series, resolved once so that a request
// costs no label lookups.
type gateSeries struct {
	requests map[string]prometheus.Counter
	duration map[adapter.Class]prometheus.Observer
	inFlight prometheus.Gauge
}

// forUpstream creates (so they show as 0) and resolves an upstream's series.
func (m *Metrics) forUpstream(upstream string) *gateSeries {
	gs := &gateSeries{requests: map[string]prometheus.Counter{}, duration: map[adapter.Class]prometheus.Observer{},
		inFlight: m.inFlight.WithLabelValues(upstream)}
	for _, o := range Outcomes {
		gs.requests[o] = m.requests.WithLabelValues(upstream, o)
	}
	for _, c := range []adapter.Class{adapter.ClassUnknown, adapter.ClassInference, adapter.ClassBorrowerRead, adapter.ClassManagement} {
		gs.duration[c] = m.duration.WithLabelValues(upstream, c.String())
	}
	return gs
}
