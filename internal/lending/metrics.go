package lending

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lending engine's Prometheus series.
type Metrics struct {
	lendable     *prometheus.GaugeVec
	ownerPresent prometheus.Gauge
	held         prometheus.GaugeFunc
	heldFn       atomic.Pointer[func() int]
	lent         *prometheus.CounterVec
	reclaim      *prometheus.HistogramVec
}

// NewMetrics registers the engine's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{}
	m.lendable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vacancyd_lendable", Help: "1 while the resource may be lent, else 0.",
	}, []string{"resource"})
	m.ownerPresent = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vacancyd_owner_present", Help: "1 while the owner is present, 0 when away or unknown.",
	})
	m.held = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vacancyd_held_work", Help: "Borrowed work that did not stop when asked and awaits its end or a release.",
	}, func() float64 {
		if f := m.heldFn.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	})
	m.lent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vacancyd_lent_gpu_seconds_total", Help: "Seconds during which borrowed work ran on the resource.",
	}, []string{"resource"})
	m.reclaim = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vacancyd_reclaim_seconds",
		Help:    "Time from the event that ended lending to the end of each reclaim phase.",
		Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"phase"})

	for _, c := range []prometheus.Collector{m.lendable, m.ownerPresent, m.held, m.lent, m.reclaim} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) init(resources []string) {
	for _, r := range resources {
		m.lendable.WithLabelValues(r)
		m.lent.WithLabelValues(r)
	}
	for _, ph := range []string{"admissions_closed", "work_ended", "unloaded"} {
		m.reclaim.WithLabelValues(ph)
	}
}

func (m *Metrics) addLent(resource string, seconds float64) {
	m.lent.WithLabelValues(resource).Add(seconds)
}

func (m *Metrics) observe(st *Status) {
	for id, r := range st.Resources {
		v := 0.0
		if r.Lendable {
			v = 1
		}
		m.lendable.WithLabelValues(id).Set(v)
	}
	if st.Presence.Present {
		m.ownerPresent.Set(1)
	} else {
		m.ownerPresent.Set(0)
	}
}

func (m *Metrics) observeReclaim(r reclaimRecord) {
	m.reclaim.WithLabelValues("admissions_closed").Observe(r.AdmissionsClosedS)
	m.reclaim.WithLabelValues("work_ended").Observe(r.WorkEndedS)
	m.reclaim.WithLabelValues("unloaded").Observe(r.UnloadedS)
}
