package main

import "testing"

// The model's counts on hand-made traces, worked out by hand: r 10/s,
// burst 20, so a lone environment (E_b 1) leases s 5/s with b_s 10 and
// its grant moves the item's tat 1 s ahead.
func TestModel(t *testing.T) {
	pushes := func(at []float64, env []int) *trace {
		tr := &trace{buckets: []string{"b"}, invocations: map[int][]span{}, ended: 100}
		for i := range at {
			tr.pushes = append(tr.pushes, push{at: at[i], env: env[i]})
		}
		return tr
	}
	tests := []struct {
		name string
		m    model
		tr   *trace
		want outcome
	}{
		{"one lease covers an environment's pushes within L", model{}, pushes([]float64{0, 1, 2, 3, 4}, []int{0, 0, 0, 0, 0}),
			outcome{leases: 1, covered: 5}},
		{"a push after L asks again", model{}, pushes([]float64{0, 15}, []int{0, 0}), outcome{leases: 2, covered: 2}},
		{"pushes over b_s + s·L book", model{}, pushes(make([]float64, 61), make([]int, 61)), outcome{leases: 1, covered: 60, booked: 1}},
		{"paced: a lease grants b_s at once", model{paced: true}, pushes(make([]float64, 12), make([]int, 12)),
			outcome{leases: 1, covered: 10, booked: 2}},
		{"a busy bucket refuses", model{refuse: true}, pushes([]float64{0, 0.5}, []int{0, 1}),
			outcome{leases: 1, covered: 1, refused: 1, refusedBusy: 1, booked: 1}},
		{"shares over r/2 refuse", model{refuse: true}, pushes([]float64{0, 2}, []int{0, 1}),
			outcome{leases: 1, covered: 1, refused: 1, refusedShare: 1, booked: 1}},
		{"a refused environment books until its backoff ends", model{refuse: true, backoff: 1}, pushes([]float64{0, 0.5, 0.6, 11}, []int{0, 1, 1, 1}),
			outcome{leases: 2, covered: 2, refused: 1, refusedBusy: 1, booked: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m
			m.rate, m.burst, m.ended = 10, 20, tt.tr.ended
			got := m.run(tt.tr, 10, 0)
			got.leased, got.frozen = 0, 0
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
