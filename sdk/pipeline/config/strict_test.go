package config

import (
	"strings"
	"testing"
)

// channel is one channel "bk" with the given base_url, extra channel
// fields and credential, and property h1 on it.
func channel(baseURL, extra, credential string) string {
	return `{"channels":{"bk":{"base_url":"` + baseURL + `"` + extra + `,"endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},` +
		`"credentials":{"c1":` + credential + `}}},"properties":{"h1":[{"channel":"bk","credential":"c1","hotel_ref":"R"}]}}`
}

// Every way a file could say something other than what it seems to: each
// is refused, naming its place.
func TestStrictInputRefused(t *testing.T) {
	good := channel("https://x.example/api", "", `{"token_env":"T"}`)
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("the base config is refused: %v", err)
	}
	tests := []struct{ name, json, want string }{
		{"two bk channels, rate 5 then 500",
			`{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},"credentials":{"c1":{"token_env":"T"}}},` +
				`"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":500,"burst":5}}},"credentials":{"c1":{"token_env":"T"}}}}}`,
			`channels.bk: key "bk" appears twice`},
		{"duplicate key deep inside", strings.Replace(good, `"rate":5,`, `"rate":5,"rate":500,`, 1), `channels.bk.endpoints.rates.limit.rate: key "rate" appears twice`},
		{"duplicate in a property's connection", strings.Replace(good, `"hotel_ref":"R"`, `"hotel_ref":"R","hotel_ref":"S"`, 1), `properties.h1[0].hotel_ref: key "hotel_ref" appears twice`},
		{"duplicate top-level key", good[:len(good)-1] + `,"max_range_days":31,"max_range_days":7}`, `max_range_days: key "max_range_days" appears twice`},
		{"trailing garbage", good + ` }garbage`, "data after the JSON value"},
		{"a second document", good + good, "data after the JSON value"},
		{"query string", channel("https://x.example/api?key=1", "", `{"token_env":"T"}`), "channels.bk.base_url: \"https://x.example/api?key=1\" has a query string"},
		{"empty query", channel("https://x.example/api?", "", `{"token_env":"T"}`), "has a query string"},
		{"fragment", channel("https://x.example/api#top", "", `{"token_env":"T"}`), "has a fragment"},
		{"userinfo", channel("https://user:pw@x.example/api", "", `{"token_env":"T"}`), "holds user info"},
		{"dot-dot segment", channel("https://x.example/api/../admin", "", `{"token_env":"T"}`), `path segment`},
		{"encoded dot-dot", channel("https://x.example/api/%2e%2e/admin", "", `{"token_env":"T"}`), `path segment`},
		{"dot-dot in an endpoint path", strings.Replace(good, `"path":"/r"`, `"path":"/../r"`, 1), `channels.bk.endpoints.rates.path: "/../r" may not hold`},
		{"query in an endpoint path", strings.Replace(good, `"path":"/r"`, `"path":"/r?x=1"`, 1), `channels.bk.endpoints.rates.path`},
		{"http without opt-in", channel("http://x.example", "", `{"token_env":"T"}`), `channels.bk.base_url: "http://x.example" is plain http`},
		{"no host", channel("https:///api", "", `{"token_env":"T"}`), "not an http(s) URL with a host"},
		{"empty property id", strings.Replace(good, `"h1":`, `"":`, 1), "properties.: property ids may not be empty or contain '#'"},
		{"property id with #", strings.Replace(good, `"h1":`, `"h#1":`, 1), "properties.h#1: property ids may not be empty or contain '#'"},
		{"token_env and secret_id", channel("https://x.example", "", `{"token_env":"T","secret_id":"s"}`), "channels.bk.credentials.c1: both token_env and secret_id"},
		{"secret_id with spaces", channel("https://x.example", "", `{"secret_id":" s"}`), "channels.bk.credentials.c1.secret_id"},
		{"token_env not a name", channel("https://x.example", "", `{"token_env":"MY-TOKEN"}`), "channels.bk.credentials.c1.token_env: \"MY-TOKEN\" is not an environment variable name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// An empty token_env is one problem and is reported once: the property
// that uses the credential is not also told the credential is missing.
func TestEmptyTokenEnvIsOneError(t *testing.T) {
	_, err := Parse([]byte(channel("https://x.example", "", `{"token_env":""}`)))
	if err == nil {
		t.Fatal("an empty token_env was accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "channels.bk.credentials.c1.token_env: empty") {
		t.Fatalf("error %q does not name the empty token_env", msg)
	}
	if n := strings.Count(msg, "\n"); n != 1 || strings.Contains(msg, "has no credential") {
		t.Fatalf("error %q reports more than the one problem", msg)
	}
}

func TestStrictInputAccepted(t *testing.T) {
	tests := []struct{ name, json, wantRef string }{
		{"http with opt-in", channel("http://127.0.0.1:8080/ota", `,"allow_http":true`, `{"token_env":"T"}`), "T"},
		{"https with a port and a path", channel("https://x.example:8443/a/b/", "", `{"token_env":"T"}`), "T"},
		{"dots inside a segment", channel("https://x.example/v1.2/..x", "", `{"token_env":"T"}`), "T"},
		{"secret_id", channel("https://x.example", "", `{"secret_id":"fleetbucket/bk-main"}`), "secretsmanager:fleetbucket/bk-main"},
		{"secret ARN", channel("https://x.example", "", `{"secret_id":"arn:aws:secretsmanager:eu-west-1:123456789012:secret:bk-AbCdEf"}`),
			"secretsmanager:arn:aws:secretsmanager:eu-west-1:123456789012:secret:bk-AbCdEf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.json))
			if err != nil {
				t.Fatalf("Parse = %v, want it accepted", err)
			}
			if got := c.Channels["bk"].Credentials["c1"].Ref(); got != tt.wantRef {
				t.Fatalf("Ref = %q, want %q", got, tt.wantRef)
			}
		})
	}
}
