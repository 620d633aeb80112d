package tasks

import (
	"reflect"
	"testing"
)

func TestAssign(t *testing.T) {
	tests := []struct {
		name    string
		n       int
		members []Member
		want    map[string][]ID
	}{
		{"1 member takes every task", 7, []Member{{ID: "a", Generation: -1}},
			map[string][]ID{"a": {0, 1, 2, 3, 4, 5, 6}}},
		{"2 members, nothing held: balanced, the larger share to the smaller ID", 7,
			[]Member{{ID: "b", Generation: -1}, {ID: "a", Generation: -1}},
			map[string][]ID{"a": {0, 1, 2, 3}, "b": {4, 5, 6}}},
		{"3 members, nothing held", 7,
			[]Member{{ID: "a", Generation: -1}, {ID: "b", Generation: -1}, {ID: "c", Generation: -1}},
			map[string][]ID{"a": {0, 1, 2}, "b": {3, 4}, "c": {5, 6}}},
		{"4 members, nothing held", 7,
			[]Member{{ID: "a", Generation: -1}, {ID: "b", Generation: -1}, {ID: "c", Generation: -1}, {ID: "d", Generation: -1}},
			map[string][]ID{"a": {0, 1}, "b": {2, 3}, "c": {4, 5}, "d": {6}}},
		{"5 members, nothing held", 7,
			[]Member{{ID: "a", Generation: -1}, {ID: "b", Generation: -1}, {ID: "c", Generation: -1}, {ID: "d", Generation: -1}, {ID: "e", Generation: -1}},
			map[string][]ID{"a": {0, 1}, "b": {2, 3}, "c": {4}, "d": {5}, "e": {6}}},
		{"more members than tasks: the rest get nothing, tasks stay whole", 2,
			[]Member{{ID: "a", Generation: -1}, {ID: "b", Generation: -1}, {ID: "c", Generation: -1}},
			map[string][]ID{"a": {0}, "b": {1}, "c": {}}},
		{"a member joins: the others keep their shares, 2 tasks move", 7,
			[]Member{{ID: "a", Previous: []ID{0, 1, 2, 3}, Generation: 5}, {ID: "b", Previous: []ID{4, 5, 6}, Generation: 5}, {ID: "c", Generation: -1}},
			map[string][]ID{"a": {0, 1, 2}, "b": {4, 5}, "c": {3, 6}}},
		{"a member leaves: survivors keep everything, its tasks spread", 7,
			[]Member{{ID: "a", Previous: []ID{0, 1, 2}, Generation: 5}, {ID: "b", Previous: []ID{3, 4}, Generation: 5}},
			map[string][]ID{"a": {0, 1, 2, 5}, "b": {3, 4, 6}}},
		{"the larger share goes to the member holding more", 5,
			[]Member{{ID: "a", Previous: []ID{0}, Generation: 5}, {ID: "b", Previous: []ID{1, 2, 3}, Generation: 5}},
			map[string][]ID{"a": {0, 4}, "b": {1, 2, 3}}},
		{"a restarted member that holds nothing gets the orphaned tasks back", 6,
			[]Member{{ID: "a", Previous: []ID{0, 1}, Generation: 5}, {ID: "b2", Generation: -1}, {ID: "c", Previous: []ID{4, 5}, Generation: 5}},
			map[string][]ID{"a": {0, 1}, "b2": {2, 3}, "c": {4, 5}}},
		{"a claim of a newer generation wins over a stale one", 3,
			[]Member{{ID: "a", Previous: []ID{0, 1}, Generation: 3}, {ID: "b", Previous: []ID{1, 2}, Generation: 4}},
			map[string][]ID{"a": {0}, "b": {1, 2}}},
		{"equal generations: the smaller member ID keeps the task", 3,
			[]Member{{ID: "b", Previous: []ID{1, 2}, Generation: 4}, {ID: "a", Previous: []ID{0, 1}, Generation: 4}},
			map[string][]ID{"a": {0, 1}, "b": {2}}},
		{"claims of tasks that do not exist are ignored", 3,
			[]Member{{ID: "a", Previous: []ID{7, -1, 2}, Generation: 4}, {ID: "b", Generation: -1}},
			map[string][]ID{"a": {0, 2}, "b": {1}}},
		{"no members", 3, nil, map[string][]ID{}},
		{"no tasks", 0, []Member{{ID: "a", Generation: -1}}, map[string][]ID{"a": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Assign(tt.n, tt.members); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Assign = %v\nwant %v", got, tt.want)
			}
		})
	}
}
