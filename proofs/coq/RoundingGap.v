(** L22(a) (proofs/rounding-gap.md): the rounding verdict of audit
    (evidence::audit::format_gap).  For an exact x known to lie in [l, h],
    a claim c and kappa = k u >= 0, g(x) = |c - x| - kappa |x| is affine
    between the points of P = {l, h} u ({0, c} n (l, h)), so "within"
    (g <= 0 at every point of P) and "beyond" (g > 0 at every point of P)
    hold for every x in [l, h].  The points are those the code evaluates. *)
From Coq Require Import Reals Psatz.
Open Scope R_scope.

Definition gap (c kappa x : R) : R := Rabs (c - x) - kappa * Rabs x.

(** the evaluation points of format_gap: l, h, 0 if l < 0 < h, c if l < c < h *)
Definition inP (l h c p : R) : Prop :=
  p = l \/ p = h \/ (p = 0 /\ l < 0 /\ 0 < h) \/ (p = c /\ l < c /\ c < h).

Lemma affine_between : forall (f : R -> R) a b p q x,
  (forall y, p <= y <= q -> f y = a + b * y) -> p <= x <= q ->
  Rmin (f p) (f q) <= f x <= Rmax (f p) (f q).
Proof.
  intros f a b p q x Hf Hx.
  rewrite (Hf p), (Hf q), (Hf x) by lra.
  assert (a + b * p <= a + b * x <= a + b * q \/ a + b * q <= a + b * x <= a + b * p).
  { destruct (Rle_dec 0 b); [left|right]; split; nra. }
  unfold Rmin, Rmax. destruct (Rle_dec _ _); lra.
Qed.

Lemma seg : forall c k p q x, p <= x <= q -> ~ (p < 0 /\ 0 < q) -> ~ (p < c /\ c < q) ->
  Rmin (gap c k p) (gap c k q) <= gap c k x <= Rmax (gap c k p) (gap c k q).
Proof.
  intros c k p q x Hx H0 Hc.
  assert (S0 : q <= 0 \/ 0 <= p) by lra. assert (Sc : q <= c \/ c <= p) by lra.
  destruct S0 as [S0|S0]; destruct Sc as [Sc|Sc].
  - apply affine_between with (a := c) (b := k - 1); auto. intros y Hy. unfold gap.
    rewrite (Rabs_left1 y), (Rabs_pos_eq (c - y)) by lra. ring.
  - apply affine_between with (a := - c) (b := 1 + k); auto. intros y Hy. unfold gap.
    rewrite (Rabs_left1 y), (Rabs_left1 (c - y)) by lra. ring.
  - apply affine_between with (a := c) (b := - 1 - k); auto. intros y Hy. unfold gap.
    rewrite (Rabs_pos_eq y), (Rabs_pos_eq (c - y)) by lra. ring.
  - apply affine_between with (a := - c) (b := 1 - k); auto. intros y Hy. unfold gap.
    rewrite (Rabs_pos_eq y), (Rabs_left1 (c - y)) by lra. ring.
Qed.

Lemma between_points : forall l h c k x, l <= x <= h ->
  exists p q, inP l h c p /\ inP l h c q /\
    Rmin (gap c k p) (gap c k q) <= gap c k x <= Rmax (gap c k p) (gap c k q).
Proof.
  intros l h c k x Hx. unfold inP.
  destruct (Rlt_dec l 0); destruct (Rlt_dec 0 h); destruct (Rlt_dec l c); destruct (Rlt_dec c h);
  destruct (Rle_dec x 0); destruct (Rle_dec x c); destruct (Rle_dec 0 c);
  first
    [ solve [exists l, h; split; [lra|split; [lra|apply seg; lra]]]
    | solve [exists l, 0; split; [lra|split; [lra|apply seg; lra]]]
    | solve [exists l, c; split; [lra|split; [lra|apply seg; lra]]]
    | solve [exists 0, h; split; [lra|split; [lra|apply seg; lra]]]
    | solve [exists c, h; split; [lra|split; [lra|apply seg; lra]]]
    | solve [exists 0, c; split; [lra|split; [lra|apply seg; lra]]]
    | solve [exists c, 0; split; [lra|split; [lra|apply seg; lra]]] ].
Qed.

(** verdict Within: g <= 0 at the points implies |c - x| <= kappa |x| on [l, h] *)
Theorem rounding_gap_within : forall l h c k,
  (forall p, inP l h c p -> gap c k p <= 0) ->
  forall x, l <= x <= h -> Rabs (c - x) <= k * Rabs x.
Proof.
  intros l h c k H x Hx.
  destruct (between_points l h c k x Hx) as (p & q & Hp & Hq & _ & Hmax).
  pose proof (H p Hp). pose proof (H q Hq).
  assert (Rmax (gap c k p) (gap c k q) <= 0) by (apply Rmax_lub; auto).
  unfold gap in *. lra.
Qed.

(** verdict Beyond: g > 0 at the points implies |c - x| > kappa |x| on [l, h] *)
Theorem rounding_gap_beyond : forall l h c k,
  (forall p, inP l h c p -> gap c k p > 0) ->
  forall x, l <= x <= h -> Rabs (c - x) > k * Rabs x.
Proof.
  intros l h c k H x Hx.
  destruct (between_points l h c k x Hx) as (p & q & Hp & Hq & Hmin & _).
  pose proof (H p Hp). pose proof (H q Hq).
  assert (0 < Rmin (gap c k p) (gap c k q)) by (apply Rmin_glb_lt; auto).
  unfold gap in *. lra.
Qed.
