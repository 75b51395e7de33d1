package format_test

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

// day is one date's state with the given values JSON.
func day(date, values string) ari.Day {
	return ari.Day{Date: date, Sequence: 7, Values: []byte(values)}
}

// days is the same values on every date from..to (inclusive, YYYY-MM-DD,
// within one year).
func days(from, to, values string) []ari.Day {
	var out []ari.Day
	for d := from; d <= to; d = nextDate(d) {
		out = append(out, day(d, values))
	}
	return out
}

func nextDate(d string) string {
	var y, m, dd int
	fmt.Sscanf(d, "%d-%d-%d", &y, &m, &dd)
	mdays := []int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	if y%4 == 0 {
		mdays[1] = 29
	}
	dd++
	if dd > mdays[m-1] {
		dd, m = 1, m+1
	}
	if m > 12 {
		m, y = 1, y+1
	}
	return fmt.Sprintf("%04d-%02d-%02d", y, m, dd)
}

func lookup(t *testing.T, name string) format.Format {
	t.Helper()
	f, ok := format.Lookup(name)
	if !ok {
		t.Fatalf("format %q not registered", name)
	}
	return f
}

// canon is an XML document's structure, whitespace between elements and
// attribute order aside: the test's examples are written for people, the
// encoder's output for machines.
func canon(t *testing.T, doc []byte) string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var b strings.Builder
	depth := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, doc)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			attrs := make([]string, 0, len(x.Attr))
			for _, a := range x.Attr {
				if a.Name.Space == "xmlns" || a.Name.Local == "xmlns" || a.Name.Local == "EchoToken" {
					continue
				}
				attrs = append(attrs, a.Name.Local+"="+a.Value)
			}
			sort.Strings(attrs)
			fmt.Fprintf(&b, "%s{%s}%s %s\n", strings.Repeat("  ", depth), x.Name.Space, x.Name.Local, strings.Join(attrs, " "))
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if s := strings.TrimSpace(string(x)); s != "" {
				fmt.Fprintf(&b, "%s%q\n", strings.Repeat("  ", depth), s)
			}
		}
	}
	return b.String()
}
