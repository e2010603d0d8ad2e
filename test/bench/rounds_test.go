package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A row measured in rounds shows the round with oria's median time, the
// floors' median, every round, and the highest peak RSS.
func TestMergeRounds(t *testing.T) {
	round := func(oria, floor, floorCPU float64, rss int64, writes int) *Result {
		return &Result{Name: "fanout", Objects: 2000, Converged: true, Seconds: oria, FloorSeconds: floor,
			FloorControlPlaneCPUSeconds: floorCPU, FloorCPUSeconds: floorCPU / 2, PeakRSS: rss, WritesTotal: writes}
	}
	tests := []struct {
		name   string
		rounds []*Result
		want   *Result
	}{{
		name: "three rounds",
		rounds: []*Result{
			func() *Result { r := round(2.1, 1.9, 4, 80, 2001); r.FloorWarmupSeconds = 2.4; return r }(),
			round(1.8, 1.6, 3, 95, 2002),
			round(2.5, 2.0, 5, 70, 2003),
		},
		want: &Result{Name: "row", Objects: 7, Converged: true, Seconds: 2.1, FloorSeconds: 1.9, FloorControlPlaneCPUSeconds: 4, FloorCPUSeconds: 2,
			PeakRSS: 95, WritesTotal: 2001, FloorWarmupSeconds: 2.4,
			Rounds: []Round{{Floor: 1.9, Oria: 2.1}, {Floor: 1.6, Oria: 1.8}, {Floor: 2.0, Oria: 2.5}}},
	}, {
		name:   "two rounds: the lower of the middle two",
		rounds: []*Result{round(3, 2, 1, 10, 1), round(2, 3, 2, 10, 2)},
		want: &Result{Name: "row", Objects: 7, Converged: true, Seconds: 2, FloorSeconds: 2, FloorControlPlaneCPUSeconds: 1, FloorCPUSeconds: 0.5,
			PeakRSS: 10, WritesTotal: 2, Rounds: []Round{{Floor: 2, Oria: 3}, {Floor: 3, Oria: 2}}},
	}, {
		name:   "one round: no list",
		rounds: []*Result{round(3, 2, 1, 10, 1)},
		want:   &Result{Name: "row", Objects: 7, Converged: true, Seconds: 3, FloorSeconds: 2, FloorControlPlaneCPUSeconds: 1, FloorCPUSeconds: 0.5, PeakRSS: 10, WritesTotal: 1},
	}, {
		name: "a round that did not converge is the row",
		rounds: []*Result{round(1, 2, 1, 10, 1), func() *Result {
			r := round(0, 2.2, 1, 30, 5)
			r.Converged, r.Error = false, "timeout"
			return r
		}()},
		want: &Result{Name: "row", Objects: 7, Error: "timeout", FloorSeconds: 2, FloorControlPlaneCPUSeconds: 1, FloorCPUSeconds: 0.5, PeakRSS: 30, WritesTotal: 5,
			Rounds: []Round{{Floor: 2, Oria: 1}, {Floor: 2.2}}},
	}, {
		name:   "no floor",
		rounds: []*Result{round(3, 0, 0, 10, 1), round(2, 0, 0, 10, 2), round(4, 0, 0, 10, 3)},
		want: &Result{Name: "row", Objects: 7, Converged: true, Seconds: 3, PeakRSS: 10, WritesTotal: 1,
			Rounds: []Round{{Oria: 3}, {Oria: 2}, {Oria: 4}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Result{Name: "row", Objects: 7}
			mergeRounds(r, tt.rounds)
			if diff := cmp.Diff(tt.want, r); diff != "" {
				t.Errorf("merged row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribeRounds(t *testing.T) {
	got := describeRounds([]Round{{Floor: 2, Oria: 2.5}, {Oria: 1}})
	want := "rounds: oria 2.50s / floor 2.00s = 1.25; oria 1.00s / floor 0.00s = 0.00"
	if got != want {
		t.Errorf("describeRounds = %q, want %q", got, want)
	}
}
