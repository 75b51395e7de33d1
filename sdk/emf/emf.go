package emf

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// Counters accumulates named values for one flush. Safe for concurrent use.
type Counters struct {
	mu     sync.Mutex
	values map[string]float64
	units  map[string]string
}

// Add adds v to a counter (unit "Count").
func (c *Counters) Add(name string, v float64) { c.add(name, v, "Count") }

// AddMillis adds a duration, in milliseconds.
func (c *Counters) AddMillis(name string, d time.Duration) {
	c.add(name, float64(d)/float64(time.Millisecond), "Milliseconds")
}

func (c *Counters) add(name string, v float64, unit string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.values == nil {
		c.values, c.units = map[string]float64{}, map[string]string{}
	}
	c.values[name] += v
	c.units[name] = unit
}

// Get returns a counter's value.
func (c *Counters) Get(name string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[name]
}

// Flush writes one EMF line with every counter (zeros included, so alarms
// see data rather than missing points) under namespace, with no
// dimensions, and resets the counters.
func (c *Counters) Flush(w io.Writer, namespace string, now time.Time) error {
	c.mu.Lock()
	values, units := c.values, c.units
	c.values, c.units = nil, nil
	c.mu.Unlock()
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	type metric struct {
		Name string `json:"Name"`
		Unit string `json:"Unit"`
	}
	metrics := make([]metric, 0, len(names))
	line := map[string]any{}
	for _, n := range names {
		metrics = append(metrics, metric{n, units[n]})
		line[n] = values[n]
	}
	line["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  namespace,
			"Dimensions": [][]string{{}},
			"Metrics":    metrics,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
