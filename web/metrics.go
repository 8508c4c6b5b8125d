package web

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/warmdesk/warmdesk/desktop"
)

// Metrics are hostd's Prometheus metrics, in a registry of their own.
type Metrics struct {
	reg    *prometheus.Registry
	create prometheus.Histogram
	reset  prometheus.Histogram
	flows  *prometheus.CounterVec
	bytes  *prometheus.CounterVec
	states *stateCollector
}

// NewMetrics registers the metrics; desktop counts and pool sizes are read
// from the Manager at each scrape.
func NewMetrics(m *desktop.Manager) *Metrics {
	reg := prometheus.NewRegistry()
	mt := &Metrics{
		reg: reg,
		create: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "warmdesk_create_seconds",
			Help:    "Time from a create request to a running desktop.",
			Buckets: latencyBuckets,
		}),
		reset: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "warmdesk_reset_seconds",
			Help:    "Time from a reset request to the desktop running again from its snapshot.",
			Buckets: latencyBuckets,
		}),
	}
	mt.flows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warmdesk_egress_connections_total",
		Help: "Connections guests opened, by verdict (allowed, refused).",
	}, []string{"verdict"})
	mt.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warmdesk_egress_bytes_total",
		Help: "Bytes carried for guests' allowed connections, by direction (out: from the guest).",
	}, []string{"direction"})
	mt.states = &stateCollector{}
	mt.Watch(m)
	reg.MustRegister(mt.create, mt.reset, mt.flows, mt.bytes, mt.states)
	return mt
}

// Watch reads desktop counts and pool sizes from m (nil: none).
func (mt *Metrics) Watch(m *desktop.Manager) { mt.states.mgr.Store(m) }

// ObserveFlow counts one guest connection when it ends.
func (mt *Metrics) ObserveFlow(allowed bool, sent, received int64) {
	verdict := "refused"
	if allowed {
		verdict = "allowed"
	}
	mt.flows.WithLabelValues(verdict).Inc()
	mt.bytes.WithLabelValues("out").Add(float64(sent))
	mt.bytes.WithLabelValues("in").Add(float64(received))
}

// latencyBuckets are the buckets of create and reset times, in seconds.
var latencyBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// ObserveCreate records one create's latency.
func (mt *Metrics) ObserveCreate(d time.Duration) { mt.create.Observe(d.Seconds()) }

// ObserveReset records one reset's latency.
func (mt *Metrics) ObserveReset(d time.Duration) { mt.reset.Observe(d.Seconds()) }

// Handler serves the metrics.
func (mt *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(mt.reg, promhttp.HandlerOpts{})
}

var (
	desktopsDesc = prometheus.NewDesc("warmdesk_desktops", "Desktops by state.", []string{"state"}, nil)
	poolDesc     = prometheus.NewDesc("warmdesk_pool_ready", "Pre-spawned machines ready, by snapshot.", []string{"snapshot"}, nil)
	cpuDesc      = prometheus.NewDesc("warmdesk_cpu_pressure", "Share of the recent window in which runnable work waited for a CPU (0 to 1).", nil, nil)
	cpuBoundDesc = prometheus.NewDesc("warmdesk_cpu_pressure_bound", "CPU pressure at or above which creates, forks and wakes queue (0: no admission by CPU).", nil, nil)
	cpuQueueDesc = prometheus.NewDesc("warmdesk_cpu_queue", "Creates, forks and wakes waiting for CPU now.", nil, nil)
	cpuWaitDesc  = prometheus.NewDesc("warmdesk_cpu_admitted_after_waiting_total", "Creates, forks and wakes admitted after waiting for CPU.", nil, nil)
	cpuBusyDesc  = prometheus.NewDesc("warmdesk_cpu_refused_total", "Creates, forks and wakes refused 503 for CPU.", nil, nil)
)

// stateCollector reads desktop counts from the Manager it watches (none
// until Watch, when metrics are made before the Manager).
type stateCollector struct {
	mgr atomic.Pointer[desktop.Manager]
	cpu atomic.Pointer[desktop.CPUAdmission]
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- desktopsDesc
	ch <- poolDesc
	ch <- cpuDesc
	ch <- cpuBoundDesc
	ch <- cpuQueueDesc
	ch <- cpuWaitDesc
	ch <- cpuBusyDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.mgr.Load()
	if m == nil {
		return
	}
	counts := map[desktop.State]int{}
	for _, s := range []desktop.State{desktop.StateCreating, desktop.StateRunning, desktop.StatePaused, desktop.StateHibernated, desktop.StateStopping, desktop.StateFailed} {
		counts[s] = 0
	}
	for _, d := range m.List() {
		counts[d.State]++
	}
	for s, n := range counts {
		ch <- prometheus.MustNewConstMetric(desktopsDesc, prometheus.GaugeValue, float64(n), string(s))
	}
	cpu := c.cpu.Load().Status()
	ch <- prometheus.MustNewConstMetric(cpuDesc, prometheus.GaugeValue, cpu.Pressure)
	ch <- prometheus.MustNewConstMetric(cpuBoundDesc, prometheus.GaugeValue, cpu.Bound)
	ch <- prometheus.MustNewConstMetric(cpuQueueDesc, prometheus.GaugeValue, float64(cpu.Queued))
	ch <- prometheus.MustNewConstMetric(cpuWaitDesc, prometheus.CounterValue, float64(cpu.Admitted))
	ch <- prometheus.MustNewConstMetric(cpuBusyDesc, prometheus.CounterValue, float64(cpu.Refused))
	snaps, _, _ := m.Lineage().Catalog().List()
	for _, s := range snaps {
		if s.Manifest.Ephemeral {
			continue
		}
		if n, pooled := m.Lineage().PoolSize(s.Name); pooled {
			ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(n), s.Name)
		}
	}
}
