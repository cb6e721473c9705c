package member

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ServesAnnotation, on a member Lease, lists the Leases that member serves
// (it runs an election for each), so that the others give it only those
// (Members.Serving): replicas of one group may run different Lease lists
// for a while, as during a rolling update that changes the shards or the
// roles. Its value is the list in natural order (Less), comma-separated,
// with each run of two or more names <prefix>-<k> … <prefix>-<k+n>
// written <prefix>-{<k>..<k+n>}: "orders-{0..63}", "compactor,reporter".
// Braces never occur in an object name, so the form is unambiguous.
const ServesAnnotation = "leasehold.io/leases"

// maxServed bounds what a decoded annotation may list: no member serves
// more Leases than a group may have.
const maxServed = 1024

// EncodeServes is the annotation's value for names.
func EncodeServes(names []string) string {
	sorted := slices.Clone(names)
	slices.SortFunc(sorted, compareNames)
	sorted = slices.Compact(sorted)
	var items []string
	for i := 0; i < len(sorted); {
		prefix, k, numbered := splitName(sorted[i])
		j := i + 1
		for numbered && j < len(sorted) {
			p, n, ok := splitName(sorted[j])
			if !ok || p != prefix || n != k+uint64(j-i) {
				break
			}
			j++
		}
		if j-i >= 2 {
			items = append(items, fmt.Sprintf("%s-{%d..%d}", prefix, k, k+uint64(j-i-1)))
		} else {
			items = append(items, sorted[i])
		}
		i = j
	}
	return strings.Join(items, ",")
}

// DecodeServes parses the annotation's value into names in natural order;
// ok is false for a malformed value or one listing more than a group may
// have (such a member serves nothing, as far as others can tell).
func DecodeServes(value string) (names []string, ok bool) {
	if value == "" {
		return nil, false
	}
	for item := range strings.SplitSeq(value, ",") {
		open := strings.IndexByte(item, '{')
		if open < 0 {
			if item == "" || strings.ContainsAny(item, "{}") {
				return nil, false
			}
			names = append(names, item)
		} else {
			lo, hi, found := strings.Cut(strings.TrimSuffix(item[open+1:], "}"), "..")
			first, err1 := strconv.ParseUint(lo, 10, 32)
			last, err2 := strconv.ParseUint(hi, 10, 32)
			if !found || !strings.HasSuffix(item, "}") || open < 2 || item[open-1] != '-' || err1 != nil || err2 != nil || last < first || last-first >= maxServed {
				return nil, false
			}
			for k := first; k <= last; k++ {
				names = append(names, item[:open]+strconv.FormatUint(k, 10))
			}
		}
		if len(names) > maxServed {
			return nil, false
		}
	}
	slices.SortFunc(names, compareNames)
	return slices.Compact(names), true
}

// compareNames orders Lease names naturally: by the prefix before a
// numeric suffix "-<k>", then by k (a name without one first), so that
// shards sort as their numbers do.
func compareNames(a, b string) int {
	pa, ka, na := splitName(a)
	pb, kb, nb := splitName(b)
	if c := cmp.Compare(pa, pb); c != 0 {
		return c
	}
	switch {
	case na != nb && !na:
		return -1
	case na != nb:
		return 1
	}
	return cmp.Compare(ka, kb)
}

// splitName splits "<prefix>-<k>" (k decimal, without leading zeros) into
// prefix and k; numbered is false for any other name, whose prefix is then
// the whole name.
func splitName(name string) (prefix string, k uint64, numbered bool) {
	dash := strings.LastIndexByte(name, '-')
	digits := name[dash+1:]
	if dash < 1 || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return name, 0, false
	}
	k, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return name, 0, false
	}
	return name[:dash], k, true
}
