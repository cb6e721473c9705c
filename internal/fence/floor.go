package fence

// FloorAnnotation is the Lease annotation on which a term's acquiring write
// (with decide.Config.FencingFloor) publishes a floor for the new term's
// token, before the token itself can be known: the resourceVersion of the
// record that write replaces, plus one.
//
// Guarantee: every earlier term's token is below the floor, and the new
// term's token is not. Every earlier term's token is a resourceVersion of
// an earlier write than the replaced record (or the record itself), so it
// is at most the replaced record's; the acquiring write's resourceVersion,
// the new token, is larger than the record it replaced. An admission policy
// that refuses a write whose token is below max(floor, published token)
// therefore refuses every earlier term's writes from the acquiring write on,
// and never the new term's.
const FloorAnnotation = "leasehold.io/fencing-floor"

// FloorAbove is the floor an acquiring write that replaces the record with
// resourceVersion replaced publishes: replaced + 1. It returns false when
// replaced is malformed or the largest Token (no floor can be published).
func FloorAbove(replaced string) (Token, bool) {
	t, err := FromResourceVersion(replaced)
	if err != nil || t == ^Token(0) {
		return 0, false
	}
	return t + 1, true
}
