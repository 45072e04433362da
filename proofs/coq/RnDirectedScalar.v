(** L3 (proofs/rn-directed-scalar.md).
    (a) For any real z (the exact result of one operation), the
        round-to-nearest result F = rnd z satisfies pred F <= z <= succ F.
        Flocq's succ/pred on FLT(-1074,53) are IEEE nextUp/nextDown
        (f64::next_up / next_down) on finite values; next_up(MAX) = +inf is
        outside the overflow-free model and trivially an upper bound.
    (b) Sums of nonnegative products in any evaluation tree:
        (S - n eta)/(1 + gamma_n) <= s <= (S + n eta)/(1 - gamma_n). *)
From Coq Require Import Reals Psatz ZArith.
From Flocq Require Import Core.
From Specbound Require Import Binary64 DotProductError.
Open Scope R_scope.

Theorem rn_directed_one_op : forall z,
  pred radix2 fexp64 (rnd z) <= z <= succ radix2 fexp64 (rnd z).
Proof.
  intros z.
  destruct (round_DN_pt radix2 fexp64 z) as (_ & Hdn & _).
  destruct (round_UP_pt radix2 fexp64 z) as (_ & Hup & _).
  pose proof (round_DN_or_UP radix2 fexp64 ZnearestE z) as [H|H]; rewrite H.
  - split.
    + eapply Rle_trans; [apply pred_le_id|]. exact Hdn.
    + eapply Rle_trans; [exact Hup|]. apply UP_le_succ_DN; auto with typeclass_instances.
  - split.
    + eapply Rle_trans; [apply pred_UP_le_DN; auto with typeclass_instances|]. exact Hdn.
    + eapply Rle_trans; [exact Hup|]. apply succ_ge_id.
Qed.

(** Monotone chains: an upper bound of x + y from upper bounds of x and y
    (the other rows of the table in L3(a) are the same argument with the
    monotonicity of the exact operation on the stated domain). *)
Theorem add_ru_sound : forall x y X Y, x <= X -> y <= Y ->
  x + y <= succ radix2 fexp64 (rnd (X + Y)).
Proof.
  intros. eapply Rle_trans; [|apply rn_directed_one_op]. lra.
Qed.

Theorem mul_ru_sound : forall x y X Y, 0 <= x <= X -> 0 <= y <= Y ->
  x * y <= succ radix2 fexp64 (rnd (X * Y)).
Proof.
  intros. eapply Rle_trans; [|apply rn_directed_one_op]. nra.
Qed.

Fixpoint nonneg (t : tree) : Prop :=
  match t with
  | Zero => True
  | Prod x y => 0 <= x * y
  | Add a b => nonneg a /\ nonneg b
  | Fma x y a => 0 <= x * y /\ nonneg a
  end.

Lemma absum_nonneg_exact : forall t, nonneg t -> absum t = exact t.
Proof.
  induction t; simpl; intros H; try tauto.
  - now rewrite Rabs_pos_eq by auto.
  - destruct H. rewrite IHt1, IHt2; auto.
  - destruct H. rewrite IHt by auto. rewrite Rabs_pos_eq by auto. reflexivity.
Qed.

Lemma div_le_l : forall a b c, 0 < c -> a * c <= b -> a <= b / c.
Proof.
  intros a b c Hc H. unfold Rdiv. apply Rmult_le_reg_r with c; auto.
  rewrite Rmult_assoc, Rinv_l by lra. lra.
Qed.
Lemma div_le_r : forall a b c, 0 < c -> a <= b * c -> a / c <= b.
Proof.
  intros a b c Hc H. unfold Rdiv. apply Rmult_le_reg_r with c; auto.
  rewrite Rmult_assoc, Rinv_l by lra. lra.
Qed.

Lemma gamma_lt_1 : forall n, INR n * u < / 2 -> 0 <= gamma n < 1.
Proof.
  intros n H. unfold gamma. pose proof (pos_INR n). pose proof u_pos.
  split.
  - apply Rmult_le_pos; [nra|]. apply Rlt_le, Rinv_0_lt_compat. lra.
  - unfold Rdiv. apply Rmult_lt_reg_r with (1 - INR n * u); [lra|].
    rewrite Rmult_assoc, Rinv_l by lra. lra.
Qed.

(** L3(b): the enclosure of the exact sum s of n nonnegative products from
    the computed S, any evaluation tree, FMA allowed, underflow included. *)
Theorem nonneg_sum_enclosure : forall t,
  nonneg t -> INR (nprod t) * u < / 2 ->
  (fl t - INR (nprod t) * eta) / (1 + gamma (nprod t)) <= exact t
  /\ exact t <= (fl t + INR (nprod t) * eta) / (1 - gamma (nprod t)).
Proof.
  intros t Hn Hu.
  pose proof (dot_product_error t Hu) as E.
  rewrite absum_nonneg_exact in E by auto.
  destruct (gamma_lt_1 _ Hu) as [G0 G1].
  apply Rabs_le_inv in E.
  split.
  - apply div_le_r; lra.
  - apply div_le_l; lra.
Qed.
