(** L23 (proofs/exact-gram.md): an entry of fl(A^T A) computed by ANY
    evaluation tree (A0.10: any order, blocking, SIMD lanes, parallel partial
    sums, FMA) is exact when every factor is an integer multiple of 2^q,
    2q >= -1074, and the squared norms of the two columns are at most
    S < 2^(53+2q): the condition gram::gram_is_exact checks (with S an upper
    bound by L3(b) of each column's sum of squares).  Cauchy-Schwarz is
    replaced by |a b| <= (a^2 + b^2)/2, which suffices because both column
    sums are bounded by the same S. *)
From Coq Require Import Reals Psatz ZArith.
From Flocq Require Import Core.
From Specbound Require Import Binary64 DotProductError.
Open Scope R_scope.

Definition on_grid (q : Z) (x : R) : Prop := exists N : Z, x = IZR N * bpow radix2 q.

Fixpoint leaves_on_grid (q : Z) (t : tree) : Prop :=
  match t with
  | Zero => True
  | Prod x y => on_grid q x /\ on_grid q y
  | Add a b => leaves_on_grid q a /\ leaves_on_grid q b
  | Fma x y a => on_grid q x /\ on_grid q y /\ leaves_on_grid q a
  end.

(** Sums of squares of the left and right factors over the leaves: for the
    entry (i, j) of A^T A these are the squared norms of columns i and j. *)
Fixpoint sumsq_l (t : tree) : R :=
  match t with
  | Zero => 0 | Prod x _ => x * x
  | Add a b => sumsq_l a + sumsq_l b
  | Fma x _ a => x * x + sumsq_l a
  end.
Fixpoint sumsq_r (t : tree) : R :=
  match t with
  | Zero => 0 | Prod _ y => y * y
  | Add a b => sumsq_r a + sumsq_r b
  | Fma _ y a => y * y + sumsq_r a
  end.

Lemma absum_le_sumsq : forall t, absum t <= (sumsq_l t + sumsq_r t) / 2.
Proof.
  assert (K : forall x y, Rabs (x * y) <= (x * x + y * y) / 2).
  { intros x y. pose proof (Rle_0_sqr (x - y)). pose proof (Rle_0_sqr (x + y)).
    unfold Rsqr in *.
    destruct (Rcase_abs (x * y)); [rewrite Rabs_left | rewrite Rabs_right]; nra. }
  induction t; simpl.
  - lra.
  - apply K.
  - lra.
  - pose proof (K r r0). lra.
Qed.

Lemma grid_mul : forall q x y, on_grid q x -> on_grid q y -> on_grid (2 * q) (x * y).
Proof.
  intros q x y (N & ->) (M & ->). exists (N * M)%Z.
  rewrite mult_IZR. replace (2 * q)%Z with (q + q)%Z by lia. rewrite bpow_plus. ring.
Qed.

Lemma grid_add : forall e x y, on_grid e x -> on_grid e y -> on_grid e (x + y).
Proof.
  intros e x y (N & ->) (M & ->). exists (N + M)%Z. rewrite plus_IZR. ring.
Qed.

(** criterion R on the grid 2^e *)
Lemma grid_F64 : forall e x, (-1074 <= e)%Z -> on_grid e x ->
  Rabs x < bpow radix2 (53 + e) -> F64 x.
Proof.
  intros e x He (N & ->) Hx. apply F64_int_pow2; auto.
  rewrite Rabs_mult, (Rabs_pos_eq (bpow _ _)) in Hx by apply bpow_ge_0.
  rewrite bpow_plus in Hx.
  apply Rmult_lt_reg_r in Hx; [|apply bpow_gt_0].
  rewrite <- abs_IZR in Hx. apply lt_IZR.
  rewrite (IZR_Zpower radix2) by lia. exact Hx.
Qed.

Theorem exact_gram_tree : forall q t, (-1074 <= 2 * q)%Z -> leaves_on_grid q t ->
  absum t < bpow radix2 (53 + 2 * q) ->
  fl t = exact t /\ on_grid (2 * q) (exact t).
Proof.
  intros q t Hq. induction t as [| x y | a IHa b IHb | x y a IHa]; intros G B;
    cbn [leaves_on_grid absum fl exact] in G, B |- *.
  - split; [reflexivity|]. exists 0%Z. ring.
  - destruct G as [Gx Gy]. pose proof (grid_mul q x y Gx Gy) as Gxy.
    split; auto. apply rnd_exact. apply (grid_F64 (2 * q)); auto.
  - destruct G as [Ga Gb]. pose proof (absum_nonneg a). pose proof (absum_nonneg b).
    destruct (IHa Ga ltac:(lra)) as [Fa Ea]. destruct (IHb Gb ltac:(lra)) as [Fb Eb].
    rewrite Fa, Fb. pose proof (grid_add _ _ _ Ea Eb) as Eab.
    split; auto. apply rnd_exact. apply (grid_F64 (2 * q)); auto.
    pose proof (exact_le_absum a). pose proof (exact_le_absum b).
    eapply Rle_lt_trans; [apply Rabs_triang|lra].
  - destruct G as (Gx & Gy & Ga). pose proof (absum_nonneg a).
    pose proof (Rabs_pos (x * y)).
    destruct (IHa Ga ltac:(lra)) as [Fa Ea].
    rewrite Fa. pose proof (grid_add _ _ _ (grid_mul q x y Gx Gy) Ea) as Eab.
    split; auto. apply rnd_exact. apply (grid_F64 (2 * q)); auto.
    pose proof (exact_le_absum a).
    eapply Rle_lt_trans; [apply Rabs_triang|lra].
Qed.

(** L23: the test of gram::gram_is_exact suffices. *)
Theorem exact_gram : forall q t S, (-1074 <= 2 * q)%Z -> leaves_on_grid q t ->
  sumsq_l t <= S -> sumsq_r t <= S -> S < bpow radix2 (53 + 2 * q) ->
  fl t = exact t.
Proof.
  intros q t S Hq G Hl Hr HS. apply (exact_gram_tree q); auto.
  pose proof (absum_le_sumsq t). lra.
Qed.

(** Float16 weights (grid 2^-24): columns of squared norm at most S < 32. *)
Theorem exact_gram_f16 : forall t S, leaves_on_grid (-24) t ->
  sumsq_l t <= S -> sumsq_r t <= S -> S < 32 -> fl t = exact t.
Proof.
  intros t S G Hl Hr HS. apply (exact_gram (-24) t S); auto; try lia.
Qed.
