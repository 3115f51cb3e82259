/// `1 exchange`, `2 exchanges`, `0 errors`: a count with its noun in the number it needs, for what the commands print.
/// `plural` where adding "s" is wrong (`retry`/`retries`).
public func counted(_ n: Int, _ singular: String, _ plural: String? = nil) -> String {
    "\(n) \(n == 1 ? singular : plural ?? singular + "s")"
}
