package format_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/sdk/pipeline/format"
)

func TestSecretNeverPrints(t *testing.T) {
	const clear = "user-1:pa55&<\"w0rd"
	s := format.NewSecret(clear)
	holder := struct {
		Name   string
		Secret format.Secret
	}{"bk", s}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("push", "secret", s, "holder", holder)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("push", "secret", s)
	js, _ := json.Marshal(holder)
	xm, _ := xml.Marshal(holder)
	outs := []string{logged.String(), string(js), string(xm)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%T%v"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, holder))
	}
	for _, out := range outs {
		if strings.Contains(out, "pa55") || strings.Contains(out, "w0rd") {
			t.Fatalf("the secret leaked: %s", out)
		}
	}
	if u, p, err := s.UserPassword(); err != nil || u != "user-1" || p != `pa55&<"w0rd` {
		t.Fatalf("UserPassword = %q %q %v", u, p, err)
	}
	for _, bad := range []string{"no-colon", ":pw", "user:"} {
		if _, _, err := format.NewSecret(bad).UserPassword(); err == nil || strings.Contains(err.Error(), bad) {
			t.Errorf("UserPassword(%q) = %v, want an error without the secret", bad, err)
		}
	}
}

// What a dead letter or a log line would store of a request holds no
// secret, for every built-in format: basic auth (opentravel), the body's
// Authentication (expedia-ar), a bearer token (json).
func TestRedactedRequestHoldsNoSecret(t *testing.T) {
	const pw = `Sup3r&<"Secret`
	secret := format.NewSecret("agent:" + pw)
	forms := []string{pw, "Sup3r&amp;&lt;&#34;Secret", `Sup3r\u0026\u003c\"Secret`, "Sup3r&amp;&lt;&quot;Secret",
		base64.StdEncoding.EncodeToString([]byte("agent:" + pw))}
	for _, name := range []string{format.JSON, format.OpenTravel, format.ExpediaAR} {
		t.Run(name, func(t *testing.T) {
			kind, values := "availability", `{"available":2}`
			w := format.Work{HotelRef: "H", Kind: kind, Secret: secret, Cells: []format.Cell{{RoomType: "R", Days: days("2027-01-01", "2027-01-03", values)}}}
			reqs, err := format.Encode(lookup(t, name), w, format.Shape{})
			if err != nil || len(reqs) != 1 {
				t.Fatalf("Encode = %d, %v", len(reqs), err)
			}
			r := reqs[0]
			sent := string(r.Body) + fmt.Sprint(r.Header["Authorization"])
			if !strings.Contains(sent, "Secret") && !strings.Contains(sent, base64.StdEncoding.EncodeToString([]byte("agent:"+pw))) {
				t.Fatalf("the request does not carry the secret at all: %s", sent)
			}
			js, _ := json.Marshal(r)
			var logged bytes.Buffer
			slog.New(slog.NewJSONHandler(&logged, nil)).Info("refused", "request", r)
			red := r.Redacted()
			dumps := []string{string(js), logged.String(), r.String(), fmt.Sprintf("%#v %+v %d", r, r, r), string(red.Body), fmt.Sprint(red.Header)}
			for _, d := range dumps {
				for _, f := range forms {
					if strings.Contains(d, f) {
						t.Fatalf("a dump holds the secret as %q:\n%s", f, d)
					}
				}
			}
			if !strings.Contains(string(js), `"hotel_ref":"H"`) || !strings.Contains(string(js), "2027-01-01") {
				t.Fatalf("the dump lost what the request carried: %s", js)
			}
		})
	}
}
