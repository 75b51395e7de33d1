package strictjson

import (
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name, json, want string // want "" means accepted
	}{
		{"plain object", `{"a":1,"b":{"c":[1,{"d":2}]}}`, ""},
		{"same key in sibling objects", `{"a":{"x":1},"b":{"x":2}}`, ""},
		{"same key in array elements", `[{"x":1},{"x":2}]`, ""},
		{"trailing whitespace", "{\"a\":1}\n\t ", ""},
		{"scalar", `42`, ""},
		{"duplicate at the root", `{"a":1,"a":2}`, `a: key "a" appears twice`},
		{"duplicate nested", `{"channels":{"bk":{"rate":5},"bk":{"rate":500}}}`, `channels.bk: key "bk" appears twice`},
		{"duplicate in an array element", `{"p":{"h1":[{"c":"x"},{"c":"x","c":"y"}]}}`, `p.h1[1].c: key "c" appears twice`},
		{"duplicate after an escape", `{"a\u0062":1,"ab":2}`, `ab: key "ab" appears twice`},
		{"trailing garbage", `{"a":1} x`, "data after the JSON value"},
		{"second value", `{"a":1}{"a":2}`, "data after the JSON value"},
		{"empty", ``, "malformed JSON"},
		{"truncated", `{"a":[1,`, "malformed JSON at a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check([]byte(tt.json))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Check = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := Check([]byte(`{"a":`)); !errors.Is(err, ErrSyntax) {
		t.Fatalf("Check of truncated JSON = %v, want ErrSyntax", err)
	}
}
