package expr

import "github.com/expr-lang/expr/ast"

// sizeFunc returns, for an expression of the payload's length alone built
// of numbers, len(payload) and + - * / (such as len(payload) / 1024), the
// function that computes it from the length, so that such a cost is
// computed without running the expression machine; ok is false for any
// other expression. The function gives what the expression gives, as a
// float64.
func sizeFunc(n ast.Node) (f func(size float64) float64, ok bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		v := float64(n.Value)
		return func(float64) float64 { return v }, true
	case *ast.FloatNode:
		v := n.Value
		return func(float64) float64 { return v }, true
	case *ast.BuiltinNode:
		if n.Name != "len" || len(n.Arguments) != 1 {
			return nil, false
		}
		if id, isID := n.Arguments[0].(*ast.IdentifierNode); isID && id.Value == "payload" {
			return func(size float64) float64 { return size }, true
		}
	case *ast.BinaryNode:
		if f, ok := byConstant(n); ok {
			return f, true
		}
		l, okL := sizeFunc(n.Left)
		r, okR := sizeFunc(n.Right)
		if !okL || !okR {
			return nil, false
		}
		switch n.Operator {
		case "+":
			return func(s float64) float64 { return l(s) + r(s) }, true
		case "-":
			return func(s float64) float64 { return l(s) - r(s) }, true
		case "*":
			return func(s float64) float64 { return l(s) * r(s) }, true
		case "/":
			return func(s float64) float64 { return l(s) / r(s) }, true
		}
	}
	return nil, false
}

// byConstant returns, for a function of the length and a number on its
// right (len(payload) / 1024), the function in one call.
func byConstant(n *ast.BinaryNode) (func(float64) float64, bool) {
	var c float64
	switch r := n.Right.(type) {
	case *ast.IntegerNode:
		c = float64(r.Value)
	case *ast.FloatNode:
		c = r.Value
	default:
		return nil, false
	}
	l, ok := sizeFunc(n.Left)
	if !ok {
		return nil, false
	}
	if isLen(n.Left) {
		switch n.Operator {
		case "+":
			return func(s float64) float64 { return s + c }, true
		case "-":
			return func(s float64) float64 { return s - c }, true
		case "*":
			return func(s float64) float64 { return s * c }, true
		case "/":
			return func(s float64) float64 { return s / c }, true
		}
		return nil, false
	}
	switch n.Operator {
	case "+":
		return func(s float64) float64 { return l(s) + c }, true
	case "-":
		return func(s float64) float64 { return l(s) - c }, true
	case "*":
		return func(s float64) float64 { return l(s) * c }, true
	case "/":
		return func(s float64) float64 { return l(s) / c }, true
	}
	return nil, false
}

// isLen reports whether n is len(payload).
func isLen(n ast.Node) bool {
	b, ok := n.(*ast.BuiltinNode)
	if !ok || b.Name != "len" || len(b.Arguments) != 1 {
		return false
	}
	id, ok := b.Arguments[0].(*ast.IdentifierNode)
	return ok && id.Value == "payload"
}
