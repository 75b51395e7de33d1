package emf

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

func TestFlushWritesOneEMFLine(t *testing.T) {
	var c Counters
	c.Add("Pushes", 2)
	c.Add("Pushes", 1)
	c.Add("VendorThrottles", 0)
	c.AddMillis("WaitTime", 1500*time.Millisecond)
	var buf bytes.Buffer
	if err := c.Flush(&buf, "fleetbucket", time.UnixMilli(1_700_000_000_000)); err != nil {
		t.Fatal(err)
	}
	var line struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Pushes          float64
		VendorThrottles float64
		WaitTime        float64
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not JSON: %v: %s", err, buf.String())
	}
	m := line.AWS.CloudWatchMetrics[0]
	if line.AWS.Timestamp != 1_700_000_000_000 || m.Namespace != "fleetbucket" || len(m.Metrics) != 3 || len(m.Dimensions) != 1 {
		t.Fatalf("bad metadata: %s", buf.String())
	}
	if line.Pushes != 3 || line.VendorThrottles != 0 || line.WaitTime != 1500 {
		t.Fatalf("values: %s", buf.String())
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Fatal("want exactly one line")
	}
	if c.Get("Pushes") != 0 {
		t.Fatal("Flush did not reset the counters")
	}
}
