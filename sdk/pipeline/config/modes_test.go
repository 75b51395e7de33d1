package config

import (
	"strings"
	"testing"
)

func modesConfig(endpoint string) string {
	return `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":` + endpoint + `},"credentials":{"c1":{"token_env":"T"}}}}}`
}

func TestModesDefaultAndParse(t *testing.T) {
	c, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if ep := c.Channels["bk"].Endpoints["rates"]; ep.Shadow() || ep.LocalShare() {
		t.Fatalf("defaults: shadow %v, local-share %v; want enforce and closed", ep.Shadow(), ep.LocalShare())
	}
	c, err = Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5},"mode":"shadow","on_store_unavailable":"local-share"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if ep := c.Channels["bk"].Endpoints["rates"]; !ep.Shadow() || !ep.LocalShare() {
		t.Fatalf("shadow %v, local-share %v; want both", ep.Shadow(), ep.LocalShare())
	}
	if _, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5},"mode":"enforce","on_store_unavailable":"closed"}`))); err != nil {
		t.Fatalf("explicit defaults refused: %v", err)
	}
}

func TestModesUnknownValuesRefusedWithPaths(t *testing.T) {
	_, err := Parse([]byte(modesConfig(`{"path":"/r","limit":{"rate":5,"burst":5},"mode":"Shadow","on_store_unavailable":"open"}`)))
	if err == nil {
		t.Fatal("unknown mode and on_store_unavailable accepted")
	}
	for _, want := range []string{
		`channels.bk.endpoints.rates.mode: "Shadow", want "enforce" (the default) or "shadow"`,
		`channels.bk.endpoints.rates.on_store_unavailable: "open", want "closed" (the default) or "local-share"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
