package sim

import (
	"testing"
	"time"
)

func TestLaneDeathsGraceTheLaneThatMetTheMost(t *testing.T) {
	change := `{"source":"pms","detail-type":"change","detail":{"property_id":"p00014","kind":"rates","from":"2027-01-01","to":"2027-01-02"}}`
	other := `{"source":"pms","detail":{"property_id":"p00003","kind":"rates"}}`
	job := `{"id":"p00014#rates#booking#c2#p00014@t-2123d8dd","channel":"booking"}`
	var d laneDeaths
	d.died([]string{change, job, other}) // one invocation: p00014/rates counted once
	d.died([]string{job})
	d.died([]string{`not json`, `{"id":"payload-1"}`})
	if got, want := d.by[laneName("p00014", "rates")], 2; got != want {
		t.Errorf("p00014/rates met %d deaths, want %d", got, want)
	}
	if got, want := d.by[laneName("p00003", "rates")], 1; got != want {
		t.Errorf("p00003/rates met %d deaths, want %d", got, want)
	}
	if len(d.by) != 2 {
		t.Errorf("lanes counted %v, want p00014/rates and p00003/rates only", d.by)
	}
	if got, want := d.grace(6*time.Minute), 12*time.Minute; got != want {
		t.Errorf("grace %v, want %v (two deaths of the lane that met the most, a visibility timeout each)", got, want)
	}
}
